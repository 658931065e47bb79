/**
 * The snapshot wire format (version 1). Every byte of input is hostile: lengths and counts are bounded
 * and checked against the bytes actually present before anything is allocated, the layout is flat
 * (no nesting, so no depth to bound), every loop is bounded by the input size, and a CRC-32 covers the
 * whole frame. `decodeSnapshot` throws SnapshotDecodeError and nothing else.
 *
 *   offset 0  magic "PMSN"
 *          4  format version (1)          u8
 *          5  kind: 1 full, 2 delta, 3 heartbeat   u8
 *          6  block size (tokens per key) u8
 *          7  flags: bit 0 = costs follow the header, bit 1 = served follows (other bits 0)   u8
 *          8  sender: varint byte length (1..64), UTF-8
 *             varints: epoch, version, tokenCount, capacity, queueDepth, pushBackMs
 *             if flags bit 0: varints fixed, per uncached, per cached, per output token, in ns
 *             if flags bit 1: varint served
 *     full:   varint n, n × 6-byte little-endian keys
 *     delta:  varint baseVersion (≤ version), varint n, n keys added, varint m, m keys removed
 *     last 4  CRC-32 (little-endian) of everything before it
 */
import { BLOCK_SIZE } from "./block-hash.js";
import { crc32 } from "./crc32.js";
import {
  type EngineCosts,
  MAX_COST_MS,
  MAX_SENDER_BYTES,
  type Snapshot,
  type SnapshotHeader,
} from "./snapshot.js";
import { MAX_VARINT_BYTES, varintSize, writeVarint } from "./varint.js";

export const SNAPSHOT_MAGIC = Uint8Array.of(0x50, 0x4d, 0x53, 0x4e); // "PMSN"
export const SNAPSHOT_FORMAT_VERSION = 1;
const KIND_CODE = { full: 1, delta: 2, heartbeat: 3 } as const;
const FIXED = 8;
const CRC_BYTES = 4;
/** Bytes of one 48-bit block key on the wire, little-endian: here and in gossip's cache summaries. */
export const KEY_BYTES = 6;
const TWO32 = 4294967296;
/** Flag bit: the header carries the sender's engine costs (frames without it decode as before). */
const FLAG_COSTS = 1;
/** Flag bit: the header carries the sender's served count (gossip "scuttlebutt" states: peer-served). */
const FLAG_SERVED = 2;
/** Costs travel as whole nanoseconds: per-token costs are far below a millisecond. */
const NS_PER_MS = 1e6;

export type SnapshotDecodeErrorCode =
  | "bad-input"
  | "too-large"
  | "truncated"
  | "bad-magic"
  | "unsupported-version"
  | "bad-kind"
  | "bad-checksum"
  | "bad-varint"
  | "bad-sender"
  | "bad-field"
  | "trailing-bytes"
  | "internal";

export class SnapshotDecodeError extends Error {
  override readonly name = "SnapshotDecodeError";
  constructor(
    readonly code: SnapshotDecodeErrorCode,
    message: string,
  ) {
    super(`snapshot decode: ${code}: ${message}`);
  }
}

export interface DecodeLimits {
  /** Largest frame accepted (bytes). */
  maxBytes: number;
  /** Most keys in one list (full body, or each delta list). */
  maxKeys: number;
  maxSenderBytes: number;
}

export const DEFAULT_DECODE_LIMITS: DecodeLimits = {
  maxBytes: 16 * 1024 * 1024,
  maxKeys: 1 << 21, // 2M keys = 33M tokens of cache at 16 tokens/key
  maxSenderBytes: MAX_SENDER_BYTES,
};

const utf8 = new TextEncoder();
const utf8Strict = new TextDecoder("utf-8", { fatal: true });

function utf8Length(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n += 4;
        i++;
      } else n += 3; // lone surrogate: TextEncoder writes U+FFFD (3 bytes)
    } else n += 3;
  }
  return n;
}

function headerNumbers(h: SnapshotHeader): number[] {
  const n = [h.epoch, h.version, h.tokenCount, h.capacity, h.queueDepth, h.pushBackMs];
  const c = h.costs;
  if (c !== undefined)
    for (const ms of [c.fixedMs, c.msPerUncached, c.msPerCached, c.msPerOutput]) n.push(costNs(ms));
  if (h.served !== undefined) n.push(h.served);
  return n;
}

function costNs(ms: number): number {
  if (!(ms >= 0 && ms <= MAX_COST_MS))
    throw new RangeError(`encodeSnapshot: cost ${ms} ms out of [0, ${MAX_COST_MS}]`);
  return Math.round(ms * NS_PER_MS);
}

function checkHeader(h: SnapshotHeader): number {
  const senderBytes = utf8Length(h.sender);
  if (senderBytes < 1 || senderBytes > MAX_SENDER_BYTES) {
    throw new RangeError(`encodeSnapshot: sender must be 1..${MAX_SENDER_BYTES} UTF-8 bytes`);
  }
  for (const v of headerNumbers(h)) {
    if (!Number.isSafeInteger(v) || v < 0) {
      throw new RangeError(`encodeSnapshot: header fields must be non-negative safe integers, got ${v}`);
    }
  }
  return senderBytes;
}

/** Exact encoded length in bytes, without building the frame (the simulator counts bytes with it). */
export function encodedSize(s: Snapshot): number {
  const senderBytes = checkHeader(s.header);
  let n = FIXED + varintSize(senderBytes) + senderBytes + CRC_BYTES;
  for (const v of headerNumbers(s.header)) n += varintSize(v);
  if (s.kind === "full") {
    n += varintSize(s.body.keys.length) + KEY_BYTES * s.body.keys.length;
  } else if (s.kind === "delta") {
    const d = s.delta;
    n += varintSize(d.baseVersion);
    n += varintSize(d.added.length) + KEY_BYTES * d.added.length;
    n += varintSize(d.removed.length) + KEY_BYTES * d.removed.length;
  }
  return n;
}

/** Writes block key `k` (< 2^48) at `pos`: KEY_BYTES bytes, little-endian. */
export function writeKey(view: DataView, pos: number, k: number): void {
  const lo = k % TWO32;
  view.setUint32(pos, lo, true);
  view.setUint16(pos + 4, (k - lo) / TWO32, true);
}

/** The block key writeKey wrote at `pos`. */
export function readKey(view: DataView, pos: number): number {
  return view.getUint16(pos + 4, true) * TWO32 + view.getUint32(pos, true);
}

function writeKeys(view: DataView, buf: Uint8Array, pos: number, keys: Float64Array): number {
  pos = writeVarint(buf, pos, keys.length);
  for (let i = 0; i < keys.length; i++) {
    writeKey(view, pos, keys[i]!);
    pos += KEY_BYTES;
  }
  return pos;
}

export function encodeSnapshot(s: Snapshot): Uint8Array {
  const size = encodedSize(s);
  if (s.kind === "full" && s.body.blockSize !== BLOCK_SIZE) {
    throw new RangeError(`encodeSnapshot: block size ${s.body.blockSize} is not ${BLOCK_SIZE}`);
  }
  if (s.kind === "delta" && (s.delta.version !== s.header.version || s.delta.baseVersion > s.delta.version)) {
    throw new RangeError("encodeSnapshot: delta versions disagree with the header");
  }
  const buf = new Uint8Array(size);
  const view = new DataView(buf.buffer);
  buf.set(SNAPSHOT_MAGIC, 0);
  buf[4] = SNAPSHOT_FORMAT_VERSION;
  buf[5] = KIND_CODE[s.kind];
  buf[6] = BLOCK_SIZE;
  buf[7] =
    (s.header.costs === undefined ? 0 : FLAG_COSTS) | (s.header.served === undefined ? 0 : FLAG_SERVED);
  const sender = utf8.encode(s.header.sender);
  let pos = writeVarint(buf, FIXED, sender.length);
  buf.set(sender, pos);
  pos += sender.length;
  for (const v of headerNumbers(s.header)) pos = writeVarint(buf, pos, v);
  if (s.kind === "full") {
    pos = writeKeys(view, buf, pos, s.body.keys);
  } else if (s.kind === "delta") {
    pos = writeVarint(buf, pos, s.delta.baseVersion);
    pos = writeKeys(view, buf, pos, s.delta.added);
    pos = writeKeys(view, buf, pos, s.delta.removed);
  }
  view.setUint32(pos, crc32(buf, 0, pos), true);
  return buf;
}

/** Bounded cursor over [pos, end). */
class Reader {
  pos: number;
  constructor(
    readonly buf: Uint8Array,
    readonly view: DataView,
    start: number,
    readonly end: number,
  ) {
    this.pos = start;
  }

  varint(what: string): number {
    let value = 0;
    let scale = 1;
    for (let i = 0; i < MAX_VARINT_BYTES; i++) {
      if (this.pos >= this.end)
        throw new SnapshotDecodeError("truncated", `${what}: input ends inside a varint`);
      const b = this.buf[this.pos++]!;
      value += (b & 0x7f) * scale;
      if ((b & 0x80) === 0) {
        if (!Number.isSafeInteger(value))
          throw new SnapshotDecodeError("bad-varint", `${what}: exceeds 2^53`);
        return value;
      }
      scale *= 128;
    }
    throw new SnapshotDecodeError("bad-varint", `${what}: longer than ${MAX_VARINT_BYTES} bytes`);
  }

  keys(what: string, maxKeys: number): Float64Array {
    const n = this.varint(`${what} count`);
    if (n > maxKeys) throw new SnapshotDecodeError("too-large", `${what}: ${n} keys > limit ${maxKeys}`);
    // Check against the bytes present before allocating: a count alone never buys memory.
    if (n * KEY_BYTES > this.end - this.pos) {
      throw new SnapshotDecodeError("truncated", `${what}: ${n} keys announced, fewer present`);
    }
    const out = new Float64Array(n);
    let p = this.pos;
    for (let i = 0; i < n; i++) {
      out[i] = readKey(this.view, p);
      p += KEY_BYTES;
    }
    this.pos = p;
    return out;
  }
}

function readCosts(r: Reader): EngineCosts {
  const ms = (what: string) => {
    const v = r.varint(what) / NS_PER_MS;
    if (v > MAX_COST_MS) throw new SnapshotDecodeError("bad-field", `${what} ${v} ms > ${MAX_COST_MS}`);
    return v;
  };
  return {
    fixedMs: ms("costs.fixed"),
    msPerUncached: ms("costs.uncached"),
    msPerCached: ms("costs.cached"),
    msPerOutput: ms("costs.output"),
  };
}

/** Decodes one frame. Throws SnapshotDecodeError (with a `code`) on anything malformed, and nothing else. */
export function decodeSnapshot(bytes: Uint8Array, limits?: Partial<DecodeLimits>): Snapshot {
  try {
    return decodeUnsafe(bytes, { ...DEFAULT_DECODE_LIMITS, ...limits });
  } catch (e) {
    if (e instanceof SnapshotDecodeError) throw e;
    // Defence in depth: a decoder bug must still surface as the codec's own error, never a crash.
    throw new SnapshotDecodeError("internal", e instanceof Error ? e.message : String(e));
  }
}

function decodeUnsafe(bytes: Uint8Array, limits: DecodeLimits): Snapshot {
  if (!(bytes instanceof Uint8Array)) throw new SnapshotDecodeError("bad-input", "expected a Uint8Array");
  const n = bytes.length;
  if (n > limits.maxBytes)
    throw new SnapshotDecodeError("too-large", `${n} bytes > limit ${limits.maxBytes}`);
  if (n < FIXED + 2 + CRC_BYTES) throw new SnapshotDecodeError("truncated", `only ${n} bytes`);
  for (let i = 0; i < SNAPSHOT_MAGIC.length; i++) {
    if (bytes[i] !== SNAPSHOT_MAGIC[i])
      throw new SnapshotDecodeError("bad-magic", "not a prefixmesh snapshot");
  }
  if (bytes[4] !== SNAPSHOT_FORMAT_VERSION) {
    throw new SnapshotDecodeError("unsupported-version", `format ${bytes[4]}, this build reads 1`);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const body = n - CRC_BYTES;
  if (view.getUint32(body, true) !== crc32(bytes, 0, body)) {
    throw new SnapshotDecodeError("bad-checksum", "CRC-32 mismatch");
  }
  const kindCode = bytes[5];
  const kind = kindCode === 1 ? "full" : kindCode === 2 ? "delta" : kindCode === 3 ? "heartbeat" : undefined;
  if (kind === undefined) throw new SnapshotDecodeError("bad-kind", `kind ${kindCode}`);
  if (bytes[6] !== BLOCK_SIZE)
    throw new SnapshotDecodeError("bad-field", `block size ${bytes[6]}, expected ${BLOCK_SIZE}`);
  const flags = bytes[7] as number;
  if ((flags & ~(FLAG_COSTS | FLAG_SERVED)) !== 0)
    throw new SnapshotDecodeError("bad-field", `unknown flags ${flags}`);

  const r = new Reader(bytes, view, FIXED, body);
  const senderLen = r.varint("sender length");
  if (senderLen < 1 || senderLen > Math.min(limits.maxSenderBytes, MAX_SENDER_BYTES)) {
    throw new SnapshotDecodeError("bad-sender", `sender length ${senderLen}`);
  }
  if (senderLen > body - r.pos) throw new SnapshotDecodeError("truncated", "sender");
  let sender: string;
  try {
    sender = utf8Strict.decode(bytes.subarray(r.pos, r.pos + senderLen));
  } catch {
    throw new SnapshotDecodeError("bad-sender", "sender is not valid UTF-8");
  }
  r.pos += senderLen;
  const header: SnapshotHeader = {
    sender,
    epoch: r.varint("epoch"),
    version: r.varint("version"),
    tokenCount: r.varint("tokenCount"),
    capacity: r.varint("capacity"),
    queueDepth: r.varint("queueDepth"),
    pushBackMs: r.varint("pushBackMs"),
  };
  if (flags & FLAG_COSTS) header.costs = readCosts(r);
  if (flags & FLAG_SERVED) header.served = r.varint("served");
  let s: Snapshot;
  if (kind === "full") {
    s = { kind, header, body: { blockSize: BLOCK_SIZE, keys: r.keys("body", limits.maxKeys) } };
  } else if (kind === "delta") {
    const baseVersion = r.varint("baseVersion");
    if (baseVersion > header.version) {
      throw new SnapshotDecodeError("bad-field", `delta base ${baseVersion} > version ${header.version}`);
    }
    const added = r.keys("added", limits.maxKeys);
    const removed = r.keys("removed", limits.maxKeys);
    s = { kind, header, delta: { baseVersion, version: header.version, added, removed } };
  } else {
    s = { kind, header };
  }
  if (r.pos !== body)
    throw new SnapshotDecodeError("trailing-bytes", `${body - r.pos} bytes after the frame`);
  return s;
}
