/**
 * Unsigned LEB128 varints for non-negative safe integers (≤ 2^53 − 1, so at most 8 bytes), used by the
 * snapshot codec. Arithmetic, not bit operators, above 31 bits: JS bit ops are 32-bit.
 */

/** Bytes `value` takes as a varint. */
export function varintSize(value: number): number {
  let n = 1;
  while (value >= 128) {
    value = Math.floor(value / 128);
    n++;
  }
  return n;
}

/** Writes `value` at `pos`; returns the position after it. Caller sized the buffer (varintSize). */
export function writeVarint(buf: Uint8Array, pos: number, value: number): number {
  while (value >= 128) {
    buf[pos++] = (value % 128) | 0x80;
    value = Math.floor(value / 128);
  }
  buf[pos++] = value;
  return pos;
}

/** Longest varint accepted: 8 bytes carry 56 bits, enough for any safe integer. */
export const MAX_VARINT_BYTES = 8;
