/**
 * Guards the process against bad model files. llama.cpp aborts the whole process (not a catchable
 * error) on some malformed inputs, e.g. a llama tokenizer without byte tokens, so every GGUF is
 * parsed and checked here before it is handed to node-llama-cpp. All counts and lengths are bounded
 * by the file size, so a hostile header cannot make us allocate or loop without limit.
 */
import { closeSync, fstatSync, openSync, readSync } from "node:fs";
import {
  alignUp,
  GGML_BLOCK,
  GGUF_DEFAULT_ALIGNMENT,
  GGUF_MAGIC,
  GgufValueType,
  SCALAR_SIZE,
} from "./format.js";

export class GgufError extends Error {
  constructor(
    readonly path: string,
    detail: string,
  ) {
    super(`invalid model file ${path}: ${detail}`);
    this.name = "GgufError";
  }
}

export interface GgufSummary {
  version: number;
  tensorCount: number;
  architecture: string;
  /** Scalar metadata (numbers, strings, booleans); arrays are summarised by length only. */
  metadata: Map<string, number | string | boolean | bigint>;
  arrayLengths: Map<string, number>;
  tokenizerModel?: string;
  chatTemplate?: string;
  fileSize: number;
}

const MAX_TENSORS = 1_000_000;
const MAX_KV = 100_000;
const MAX_DIMS = 4;
const HEADER_START = 1 << 20;
const HEADER_MAX = 512 << 20;

class NeedMore extends Error {}

class Cursor {
  pos = 0;
  constructor(
    private readonly buf: Buffer,
    private readonly complete: boolean,
    private readonly fail: (d: string) => never,
  ) {}
  private need(n: number): void {
    if (this.pos + n > this.buf.length) {
      if (this.complete)
        this.fail(`truncated header (needs byte ${this.pos + n}, file has ${this.buf.length})`);
      throw new NeedMore();
    }
  }
  u8(): number {
    this.need(1);
    return this.buf.readUInt8(this.pos++);
  }
  u32(): number {
    this.need(4);
    const v = this.buf.readUInt32LE(this.pos);
    this.pos += 4;
    return v;
  }
  u64(): number {
    this.need(8);
    const v = this.buf.readBigUInt64LE(this.pos);
    this.pos += 8;
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) this.fail(`64-bit count ${v} is out of range`);
    return Number(v);
  }
  str(maxLen: number): string {
    const len = this.u64();
    if (len > maxLen) this.fail(`string of ${len} bytes exceeds the file`);
    this.need(len);
    const s = this.buf.toString("utf8", this.pos, this.pos + len);
    this.pos += len;
    return s;
  }
  skip(n: number): void {
    this.need(n);
    this.pos += n;
  }
  scalar(type: number): number | boolean | bigint {
    const size = SCALAR_SIZE[type]!;
    this.need(size);
    const b = this.buf;
    const p = this.pos;
    this.pos += size;
    switch (type) {
      case GgufValueType.UINT8:
        return b.readUInt8(p);
      case GgufValueType.INT8:
        return b.readInt8(p);
      case GgufValueType.UINT16:
        return b.readUInt16LE(p);
      case GgufValueType.INT16:
        return b.readInt16LE(p);
      case GgufValueType.UINT32:
        return b.readUInt32LE(p);
      case GgufValueType.INT32:
        return b.readInt32LE(p);
      case GgufValueType.FLOAT32:
        return b.readFloatLE(p);
      case GgufValueType.BOOL:
        return b.readUInt8(p) !== 0;
      case GgufValueType.UINT64:
        return b.readBigUInt64LE(p);
      case GgufValueType.INT64:
        return b.readBigInt64LE(p);
      default:
        return b.readDoubleLE(p);
    }
  }
}

function readHead(fd: number, size: number): Buffer {
  const buf = Buffer.alloc(size);
  let off = 0;
  while (off < size) {
    const n = readSync(fd, buf, off, size - off, off);
    if (n === 0) break;
    off += n;
  }
  return buf.subarray(0, off);
}

/** Parses and checks a GGUF file's header and tensor table; throws GgufError with a clear reason. */
export function validateGguf(path: string): GgufSummary {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch (e) {
    throw new GgufError(path, `cannot open (${(e as NodeJS.ErrnoException).code ?? String(e)})`);
  }
  try {
    const fileSize = fstatSync(fd).size;
    for (let n = Math.min(HEADER_START, fileSize); ; n = Math.min(n * 2, fileSize)) {
      const buf = readHead(fd, n);
      try {
        return parse(path, buf, buf.length >= fileSize, fileSize);
      } catch (e) {
        if (!(e instanceof NeedMore)) throw e;
        if (n >= HEADER_MAX) throw new GgufError(path, `header larger than ${HEADER_MAX} bytes`);
      }
    }
  } finally {
    closeSync(fd);
  }
}

function parse(path: string, buf: Buffer, complete: boolean, fileSize: number): GgufSummary {
  const fail = (d: string): never => {
    throw new GgufError(path, d);
  };
  if (fileSize < 24) fail(`only ${fileSize} bytes, too small to be a GGUF file`);
  const c = new Cursor(buf, complete, fail);
  if (c.u32() !== GGUF_MAGIC) fail("not a GGUF file (bad magic)");
  const version = c.u32();
  if (version !== 2 && version !== 3) fail(`unsupported GGUF version ${version} (need 2 or 3)`);
  const tensorCount = c.u64();
  const kvCount = c.u64();
  if (tensorCount > MAX_TENSORS) fail(`implausible tensor count ${tensorCount}`);
  if (kvCount > MAX_KV) fail(`implausible metadata count ${kvCount}`);
  const metadata = new Map<string, number | string | boolean | bigint>();
  const arrayLengths = new Map<string, number>();
  let tokens: string[] | undefined;
  let tokenTypes: number[] | undefined;
  for (let i = 0; i < kvCount; i++) {
    const key = c.str(fileSize);
    const type = c.u32();
    if (type === GgufValueType.STRING) metadata.set(key, c.str(fileSize));
    else if (type === GgufValueType.ARRAY) {
      const elemType = c.u32();
      const len = c.u64();
      if (len > fileSize) fail(`array ${key} has ${len} elements, more than the file's bytes`);
      arrayLengths.set(key, len);
      const keep = key === "tokenizer.ggml.tokens" || key === "tokenizer.ggml.token_type";
      const vals: (string | number)[] = [];
      for (let j = 0; j < len; j++) {
        if (elemType === GgufValueType.STRING) {
          const s = c.str(fileSize);
          if (keep) vals.push(s);
        } else if (SCALAR_SIZE[elemType] !== undefined) {
          if (keep) vals.push(Number(c.scalar(elemType)));
          else {
            c.skip(SCALAR_SIZE[elemType]! * (len - j));
            break;
          }
        } else fail(`array ${key} has unsupported element type ${elemType}`);
      }
      if (key === "tokenizer.ggml.tokens") tokens = vals as string[];
      if (key === "tokenizer.ggml.token_type") tokenTypes = vals as number[];
    } else if (SCALAR_SIZE[type] !== undefined) metadata.set(key, c.scalar(type));
    else fail(`metadata ${key} has unknown value type ${type}`);
  }
  const architecture = metadata.get("general.architecture");
  if (typeof architecture !== "string") fail("missing general.architecture");
  if (tensorCount === 0) fail("contains no tensors (a vocab-only GGUF cannot serve inference)");
  const alignment = Number(metadata.get("general.alignment") ?? GGUF_DEFAULT_ALIGNMENT);
  if (!Number.isInteger(alignment) || alignment <= 0 || alignment > 65536) fail(`bad alignment ${alignment}`);
  const tensorEnds: number[] = [];
  for (let i = 0; i < tensorCount; i++) {
    const name = c.str(fileSize);
    const nDims = c.u32();
    if (nDims < 1 || nDims > MAX_DIMS) fail(`tensor ${name} has ${nDims} dimensions`);
    let elements = 1;
    for (let d = 0; d < nDims; d++) {
      const dim = c.u64();
      if (dim < 1) fail(`tensor ${name} has an empty dimension`);
      elements *= dim;
    }
    const type = c.u32();
    const offset = c.u64();
    if (offset % alignment !== 0) fail(`tensor ${name} data is misaligned`);
    const block = GGML_BLOCK[type];
    if (block) {
      if (elements % block[0] !== 0) fail(`tensor ${name} size is not a multiple of its block size`);
      tensorEnds.push(offset + (elements / block[0]) * block[1]);
    } else tensorEnds.push(offset);
  }
  const dataStart = alignUp(c.pos, alignment);
  const dataEnd = dataStart + Math.max(0, ...tensorEnds);
  if (dataEnd > fileSize) fail(`truncated: tensor data needs ${dataEnd} bytes, file has ${fileSize}`);
  const tokenizerModel = metadata.get("tokenizer.ggml.model");
  if (tokenizerModel === "llama") checkByteTokens(tokens, tokenTypes, fail);
  if (architecture === "llama") {
    for (const k of [
      "embedding_length",
      "block_count",
      "attention.head_count",
      "attention.layer_norm_rms_epsilon",
    ]) {
      if (!metadata.has(`llama.${k}`)) fail(`missing llama.${k}`);
    }
  }
  return {
    version,
    tensorCount,
    architecture: architecture as string,
    metadata,
    arrayLengths,
    tokenizerModel: typeof tokenizerModel === "string" ? tokenizerModel : undefined,
    chatTemplate: (metadata.get("tokenizer.chat_template") as string | undefined) ?? undefined,
    fileSize,
  };
}

/** llama.cpp's SPM tokenizer looks up `<0x0A>` etc. at load and aborts the process if absent. */
function checkByteTokens(
  tokens: string[] | undefined,
  types: number[] | undefined,
  fail: (d: string) => never,
): void {
  if (!tokens) fail("llama tokenizer without tokenizer.ggml.tokens");
  const index = new Map<string, number>();
  tokens!.forEach((t, i) => {
    index.set(t, i);
  });
  for (let b = 0; b < 256; b++) {
    const piece = `<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`;
    const id = index.get(piece);
    if (id === undefined) fail(`llama tokenizer lacks byte token ${piece}`);
    if (types && types[id!] !== 6)
      fail(`byte token ${piece} has token type ${types[id!]}, expected 6 (byte)`);
  }
}
