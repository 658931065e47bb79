/** GGUF on-disk constants shared by the writer and the header validator (see ggml/docs/gguf.md). */

export const GGUF_MAGIC = 0x46554747; // "GGUF" read as a little-endian uint32
export const GGUF_DEFAULT_ALIGNMENT = 32;

/** Metadata value types. */
export const GgufValueType = {
  UINT8: 0,
  INT8: 1,
  UINT16: 2,
  INT16: 3,
  UINT32: 4,
  INT32: 5,
  FLOAT32: 6,
  BOOL: 7,
  STRING: 8,
  ARRAY: 9,
  UINT64: 10,
  INT64: 11,
  FLOAT64: 12,
} as const;

/** Fixed byte size of each scalar metadata type (strings and arrays are variable). */
export const SCALAR_SIZE: Record<number, number> = {
  0: 1,
  1: 1,
  2: 2,
  3: 2,
  4: 4,
  5: 4,
  6: 4,
  7: 1,
  10: 8,
  11: 8,
  12: 8,
};

/** ggml tensor types this project writes. */
export const GgmlType = { F32: 0, F16: 1, Q8_0: 8 } as const;

/**
 * [elements per block, bytes per block] for the ggml types whose size we know; used to check that
 * every tensor's data lies inside the file (a truncated file must be rejected before llama.cpp sees it).
 */
export const GGML_BLOCK: Record<number, readonly [number, number]> = {
  0: [1, 4], // F32
  1: [1, 2], // F16
  2: [32, 18], // Q4_0
  3: [32, 20], // Q4_1
  6: [32, 22], // Q5_0
  7: [32, 24], // Q5_1
  8: [32, 34], // Q8_0
  9: [32, 36], // Q8_1
  10: [256, 84], // Q2_K
  11: [256, 110], // Q3_K
  12: [256, 144], // Q4_K
  13: [256, 176], // Q5_K
  14: [256, 210], // Q6_K
  15: [256, 292], // Q8_K
  24: [1, 1], // I8
  25: [1, 2], // I16
  26: [1, 4], // I32
  27: [1, 8], // I64
  28: [1, 8], // F64
  30: [1, 2], // BF16
};

/** llama.cpp token types (tokenizer.ggml.token_type). */
export const TokenType = { NORMAL: 1, UNKNOWN: 2, CONTROL: 3, USER_DEFINED: 4, UNUSED: 5, BYTE: 6 } as const;

export function alignUp(n: number, alignment: number): number {
  return Math.ceil(n / alignment) * alignment;
}
