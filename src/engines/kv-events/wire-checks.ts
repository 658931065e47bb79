/**
 * The KV-event decoder's checks of single values from an untrusted publisher: block hashes (as map
 * keys), token ids, integers in range, bounded strings, the medium; each failure a `KvWireError`
 * naming the field.
 */
import { type BlockHash, KvWireError, type WireLimits } from "./wire-types.js";

export function hashList(v: unknown, where: string, limits: WireLimits): BlockHash[] {
  if (!Array.isArray(v)) throw new KvWireError(`${where} is not a list`);
  if (v.length > limits.maxHashesPerEvent)
    throw new KvWireError(`${where} has ${v.length} hashes, limit ${limits.maxHashesPerEvent}`);
  return v.map((h, i) => hash(h, `${where}[${i}]`));
}

const U64_MAX = (1n << 64n) - 1n;
const I64_MIN = -(1n << 63n);
const MAX_HASH_BYTES = 64;

export function hash(v: unknown, where: string): BlockHash {
  if (typeof v === "number") {
    if (!Number.isSafeInteger(v)) throw new KvWireError(`${where} is not an integer`);
    return `i:${v}`;
  }
  if (typeof v === "bigint") {
    if (v < I64_MIN || v > U64_MAX) throw new KvWireError(`${where} exceeds 64 bits`);
    return `i:${v}`;
  }
  if (v instanceof Uint8Array) {
    if (v.byteLength === 0 || v.byteLength > MAX_HASH_BYTES)
      throw new KvWireError(`${where} has ${v.byteLength} bytes`);
    return `b:${Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("hex")}`;
  }
  throw new KvWireError(`${where} is a ${describe(v)}, expected an integer or bytes`);
}

const TOKEN_MAX = 0xffff_ffff;

export function tokenList(v: unknown, where: string, limits: WireLimits): Uint32Array {
  if (!Array.isArray(v)) throw new KvWireError(`${where} is not a list`);
  if (v.length > limits.maxTokensPerEvent)
    throw new KvWireError(`${where} has ${v.length} tokens, limit ${limits.maxTokensPerEvent}`);
  const out = new Uint32Array(v.length);
  for (let i = 0; i < v.length; i++) {
    let t = v[i];
    // SGLang's EAGLE bigram keys expose (token, next token) pairs; the position's token is the first.
    if (Array.isArray(t) && t.length === 2) t = t[0];
    if (typeof t === "bigint" && t >= 0n && t <= BigInt(TOKEN_MAX)) t = Number(t);
    if (typeof t !== "number" || !Number.isInteger(t) || t < 0 || t > TOKEN_MAX)
      throw new KvWireError(`${where}[${i}] is not a token id`);
    out[i] = t;
  }
  return out;
}

export function mediumOf(v: unknown, where: string, limits: WireLimits): string | null {
  const s = optionalString(v, where, limits);
  return s === null ? null : s.toUpperCase() === "GPU" ? "GPU" : s;
}

export function int(v: unknown, where: string, min: number, max: number): number {
  if (typeof v === "bigint" && v >= BigInt(min) && v <= BigInt(max)) return Number(v);
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max)
    throw new KvWireError(`${where} is not an integer in [${min}, ${max}]`);
  return v;
}

export function optionalInt(v: unknown, where: string, min: number, max: number): number | null {
  return v === null || v === undefined ? null : int(v, where, min, max);
}

export function optionalString(v: unknown, where: string, limits: WireLimits): string | null {
  if (v === null || v === undefined) return null;
  if (typeof v !== "string") throw new KvWireError(`${where} is a ${describe(v)}, expected a string`);
  if (v.length > limits.maxStringLength)
    throw new KvWireError(`${where} is longer than ${limits.maxStringLength}`);
  return v;
}

export function describe(v: unknown): string {
  if (v === null) return "nil";
  if (Array.isArray(v)) return "array";
  if (v instanceof Map) return "map";
  if (v instanceof Uint8Array) return "bytes";
  if (typeof v === "string") return `string '${v.slice(0, 40)}'`;
  return typeof v;
}
