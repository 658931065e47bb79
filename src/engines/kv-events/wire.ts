/**
 * The KV-event wire format of vLLM and SGLang (`--kv-events-config` with the ZMQ publisher), decoded
 * into checked values. The facts, from vllm/distributed/kv_events.py and SGLang's
 * disaggregation/kv_events.py (docs/engines-kv-events.md names the versions):
 *
 * - PUB message: three frames (topic, sequence number as 8 bytes big-endian, msgpack payload). The
 *   SUB side filters topics by prefix, so the topic frame is compared exactly here.
 * - Replay (ROUTER): the client sends the first sequence number it lacks (8 bytes big-endian, after
 *   the empty delimiter a DEALER sends itself); the publisher answers with (sequence, payload) for every
 *   batch it still buffers from there, then (−1 as 8 signed bytes, empty payload).
 * - Payload: msgspec structs. `EventBatch{ts, events, data_parallel_rank}` (SGLang: `attn_dp_rank`) is
 *   a positional array in every release we know of and a map in the newest vLLM source; both decode.
 *   Each event is a tagged struct: a positional array whose first element is the class name
 *   (`["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium,
 *   lora_name, extra_keys, group_idx, kv_cache_spec_kind, kv_cache_spec_sliding_window]`,
 *   `["BlockRemoved", block_hashes, medium, group_idx]`, `["AllBlocksCleared"]`; msgspec drops
 *   trailing fields still at their default), or, since vLLM switched to maps (and SGLang after it), a
 *   map holding the class name under `type` plus fields by name (`remaining_copy_counts` on removals).
 * - Block hashes are integers (u64, or signed i64 in SGLang) or bytes (vLLM's sha256 hashes).
 *
 * The publisher is still untrusted input: every size and count is bounded, every field type-checked;
 * anything else is a `KvWireError` and the batch is dropped whole (its sequence number still counts).
 */
import { Unpackr } from "msgpackr";

/** A block hash as a map key: `i:<decimal>` for integers, `b:<hex>` for bytes. */
export type BlockHash = string;

export interface BlockStored {
  type: "BlockStored";
  hashes: BlockHash[];
  /** The block before `hashes[0]` in its sequence; null: the first block of a sequence. */
  parent: BlockHash | null;
  /** All blocks' tokens, concatenated (`hashes.length` equal parts). */
  tokens: Uint32Array;
  blockSize: number;
  /** "GPU" in upper case, another medium as sent, or null (older publishers: GPU). */
  medium: string | null;
  /**
   * Set when the blocks' hashes depend on more than tokens, parent and `namespace` (multimodal
   * inputs, an adapter known by id only, or an extension we do not know): such blocks never match.
   */
  namespaced: boolean;
  /**
   * Per block, where the publisher keys blocks one by one (vLLM's `extra_keys`: multimodal inputs and
   * the cache salt touch only the blocks they fall in; the blocks after chain to those): true for a
   * block whose own hash takes more than tokens and parent. Null: `namespaced` says it for all.
   */
  blockNamespaced: boolean[] | null;
  /**
   * The cache namespace the chain's hashes name, where the publisher says it in a form the API names
   * too: the LoRA adapter (`lora_name`, vLLM's model name of the adapter) and the tenant's salt (vLLM
   * mixes `cache_salt` into the sequence's first block's extra keys, after the LoRA name). Absent:
   * the default namespace. The mirror roots such a chain at `keyTokens` of its namespace.
   */
  namespace?: { adapter?: string; cacheSalt?: string };
  /** vLLM's KV-cache group (hybrid models have several); null: the only group. */
  group: number | null;
}

export interface BlockRemoved {
  type: "BlockRemoved";
  hashes: BlockHash[];
  medium: string | null;
  group: number | null;
  /** Physical copies of each hash left after this removal, where the publisher says (newer vLLM). */
  remainingCopies: number[] | null;
}

export interface AllBlocksCleared {
  type: "AllBlocksCleared";
}

export type KvEvent = BlockStored | BlockRemoved | AllBlocksCleared;

export interface KvEventBatch {
  /** The publisher's wall clock, seconds. */
  ts: number;
  events: KvEvent[];
  dataParallelRank: number | null;
}

export interface WireLimits {
  maxPayloadBytes: number;
  maxEventsPerBatch: number;
  maxHashesPerEvent: number;
  maxTokensPerEvent: number;
  maxStringLength: number;
  /** Largest msgpack map / positional struct accepted for one event. */
  maxFieldsPerEvent: number;
}

export const DEFAULT_WIRE_LIMITS: Readonly<WireLimits> = {
  maxPayloadBytes: 16 << 20,
  maxEventsPerBatch: 1 << 16,
  maxHashesPerEvent: 1 << 16,
  maxTokensPerEvent: 1 << 21,
  maxStringLength: 4096,
  maxFieldsPerEvent: 64,
};

export class KvWireError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "KvWireError";
  }
}

/** The replay endpoint's end-of-replay marker. */
export const END_OF_REPLAY = -1;

/**
 * No records, no structured-clone references, maps as Map (keys of any type, no prototype), 64-bit
 * integers as bigint (hashes exceed 2^53). Other msgpack extensions decode to objects the checks
 * below reject.
 */
const unpackr = new Unpackr({
  useRecords: false,
  mapsAsObjects: false,
  int64AsType: "bigint",
  structuredClone: false,
  moreTypes: false,
});

/** An 8-byte big-endian sequence number; −1 only where `allowEnd` (the replay end marker). */
export function decodeSequence(frame: Uint8Array, allowEnd = false): number {
  if (frame.byteLength !== 8) throw new KvWireError(`sequence frame has ${frame.byteLength} bytes, not 8`);
  const v = new DataView(frame.buffer, frame.byteOffset, 8).getBigInt64(0);
  if (v === -1n && allowEnd) return END_OF_REPLAY;
  if (v < 0n || v > BigInt(Number.MAX_SAFE_INTEGER))
    throw new KvWireError(`sequence number ${v} is out of range`);
  return Number(v);
}

/** The 8-byte big-endian form of a sequence number, as a replay request carries it. */
export function encodeSequence(seq: number): Uint8Array {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigInt64(0, BigInt(seq));
  return out;
}

export function decodeBatch(payload: Uint8Array, limits: WireLimits = DEFAULT_WIRE_LIMITS): KvEventBatch {
  if (payload.byteLength === 0) throw new KvWireError("empty payload");
  if (payload.byteLength > limits.maxPayloadBytes)
    throw new KvWireError(`payload of ${payload.byteLength} bytes exceeds ${limits.maxPayloadBytes}`);
  let raw: unknown;
  try {
    raw = unpackr.unpack(payload);
  } catch (e) {
    // Truncated or malformed msgpack, and stack exhaustion on absurd nesting, all land here.
    throw new KvWireError(`payload is not msgpack: ${(e as Error).message.slice(0, 200)}`);
  }
  let ts: unknown;
  let events: unknown;
  let rank: unknown = null;
  if (Array.isArray(raw)) {
    if (raw.length < 2 || raw.length > 8)
      throw new KvWireError(`batch array has ${raw.length} fields, expected [ts, events, rank?]`);
    [ts, events] = raw;
    if (raw.length > 2) rank = raw[2];
  } else if (raw instanceof Map) {
    if (raw.size > limits.maxFieldsPerEvent) throw new KvWireError("batch map has too many fields");
    ts = raw.get("ts");
    events = raw.get("events");
    rank = raw.get("data_parallel_rank") ?? raw.get("attn_dp_rank") ?? null;
  } else {
    throw new KvWireError(`batch is a ${describe(raw)}, expected an array or a map`);
  }
  if (typeof ts !== "number" || !Number.isFinite(ts)) throw new KvWireError("batch ts is not a number");
  if (!Array.isArray(events)) throw new KvWireError("batch events is not an array");
  if (events.length > limits.maxEventsPerBatch)
    throw new KvWireError(`batch has ${events.length} events, limit ${limits.maxEventsPerBatch}`);
  const dataParallelRank = optionalInt(rank, "data_parallel_rank", 0, 1 << 20);
  return { ts, events: events.map((e, i) => decodeEvent(e, i, limits)), dataParallelRank };
}

/** An event's fields by name, whichever encoding carried them. */
type Fields = (name: string) => unknown;

const STORED_POSITIONS = [
  "block_hashes",
  "parent_block_hash",
  "token_ids",
  "block_size",
  "lora_id",
  "medium",
  "lora_name",
  "extra_keys",
  "group_idx",
  "kv_cache_spec_kind",
  "kv_cache_spec_sliding_window",
] as const;
const REMOVED_POSITIONS = ["block_hashes", "medium", "group_idx", "remaining_copy_counts"] as const;
const POSITIONS: Record<string, readonly string[]> = {
  BlockStored: STORED_POSITIONS,
  BlockRemoved: REMOVED_POSITIONS,
  AllBlocksCleared: [],
};
/** Positional fields a BlockStored must carry (msgspec omits only trailing defaults). */
const STORED_REQUIRED = 4;

function decodeEvent(raw: unknown, index: number, limits: WireLimits): KvEvent {
  const where = `event ${index}`;
  let tag: unknown;
  let fields: Fields;
  let positional = false;
  let extension = false;
  if (Array.isArray(raw)) {
    if (raw.length === 0 || raw.length > limits.maxFieldsPerEvent)
      throw new KvWireError(`${where}: tagged array has ${raw.length} elements`);
    tag = raw[0];
    const names = typeof tag === "string" ? POSITIONS[tag] : undefined;
    fields = (name) => {
      const i = names ? names.indexOf(name) : -1;
      return i >= 0 ? raw[i + 1] : undefined;
    };
    positional = true;
    if (tag === "BlockStored") {
      if (raw.length < 1 + STORED_REQUIRED)
        throw new KvWireError(
          `${where}: BlockStored has ${raw.length - 1} fields, needs ≥ ${STORED_REQUIRED}`,
        );
      // Fields past the ones we know: a newer or another engine's extension; it may key the hashes.
      extension = raw.length > 1 + STORED_POSITIONS.length;
    }
    if (tag === "BlockRemoved" && raw.length < 2)
      throw new KvWireError(`${where}: BlockRemoved has no block_hashes`);
  } else if (raw instanceof Map) {
    if (raw.size > limits.maxFieldsPerEvent) throw new KvWireError(`${where}: map has ${raw.size} fields`);
    tag = raw.get("type");
    fields = (name) => raw.get(name);
  } else {
    throw new KvWireError(`${where} is a ${describe(raw)}, expected a tagged array or map`);
  }
  switch (tag) {
    case "BlockStored":
      return decodeStored(fields, where, limits, positional, extension);
    case "BlockRemoved":
      return decodeRemoved(fields, where, limits);
    case "AllBlocksCleared":
      return { type: "AllBlocksCleared" };
    default:
      throw new KvWireError(`${where}: unknown event type ${describe(tag)}`);
  }
}

function decodeStored(
  f: Fields,
  where: string,
  limits: WireLimits,
  positional: boolean,
  extension: boolean,
): BlockStored {
  const hashes = hashList(f("block_hashes"), `${where}.block_hashes`, limits);
  if (hashes.length === 0) throw new KvWireError(`${where}: BlockStored with no block_hashes`);
  const parentRaw = f("parent_block_hash");
  const parent = parentRaw === null || parentRaw === undefined ? null : hash(parentRaw, `${where}.parent`);
  const tokens = tokenList(f("token_ids"), `${where}.token_ids`, limits);
  const blockSize = int(f("block_size"), `${where}.block_size`, 0, limits.maxTokensPerEvent);
  const medium = mediumOf(f("medium"), `${where}.medium`, limits);
  const group = optionalInt(f("group_idx"), `${where}.group_idx`, 0, 1 << 16);
  optionalString(f("kv_cache_spec_kind"), `${where}.kv_cache_spec_kind`, limits);
  let namespaced = extension;
  const loraName = f("lora_name");
  let adapter: string | undefined;
  if (positional && loraName !== null && loraName !== undefined && typeof loraName !== "string") {
    // Position 7 is lora_name in vLLM but another extension in other publishers: it may key hashes.
    namespaced = true;
  } else {
    const name = optionalString(loraName, `${where}.lora_name`, limits);
    if (name !== null) adapter = name;
  }
  const loraId = f("lora_id");
  if (loraId !== null && loraId !== undefined) {
    int(loraId, `${where}.lora_id`, Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER);
    // Older vLLM keys blocks by the adapter's integer id alone: not a name the API knows.
    if (adapter === undefined) namespaced = true;
  }
  const extra = f("extra_keys");
  let blockNamespaced: boolean[] | null = null;
  let cacheSalt: string | undefined;
  if (extra !== null && extra !== undefined) {
    if (!Array.isArray(extra)) {
      if (!positional) throw new KvWireError(`${where}.extra_keys is not an array`);
      namespaced = true;
    } else if (extra.length === hashes.length) {
      blockNamespaced = extra.map((k, i) => {
        const rest = namespaceKeysRemoved(k, adapter);
        if (rest === null) return false;
        // vLLM: extra keys are LoRA name, multimodal keys, cache salt (first block only), embeddings.
        // A lone string left on a sequence's first block is the salt; anything else keys the block
        // by inputs the node cannot reproduce.
        if (
          i === 0 &&
          parent === null &&
          rest.length === 1 &&
          typeof rest[0] === "string" &&
          rest[0] !== ""
        ) {
          cacheSalt = rest[0];
          return false;
        }
        return true;
      });
    } else if (extra.some((k) => k !== null)) namespaced = true;
  }
  if (!positional) {
    // Map-encoded events name their fields; these key the hash chain (vLLM's cache_salt, SGLang's
    // metadata). An empty metadata map changes nothing.
    const salt = f("cache_salt");
    if (typeof salt === "string" && salt !== "" && (cacheSalt === undefined || cacheSalt === salt)) {
      if (parent === null) cacheSalt = salt;
    } else if (salt !== null && salt !== undefined) namespaced = true;
    const meta = f("metadata");
    if (meta !== null && meta !== undefined && !(meta instanceof Map && meta.size === 0)) namespaced = true;
  }
  const namespace =
    adapter === undefined && cacheSalt === undefined
      ? undefined
      : { ...(adapter !== undefined ? { adapter } : {}), ...(cacheSalt !== undefined ? { cacheSalt } : {}) };
  return {
    type: "BlockStored",
    hashes,
    parent,
    tokens,
    blockSize,
    medium,
    namespaced,
    blockNamespaced,
    ...(namespace ? { namespace } : {}),
    group,
  };
}

/** A block's extra keys without the LoRA name vLLM puts first; null when nothing is left. */
function namespaceKeysRemoved(keys: unknown, adapter: string | undefined): unknown[] | null {
  if (keys === null || keys === undefined) return null;
  if (!Array.isArray(keys)) return [keys];
  const rest = adapter !== undefined && keys[0] === adapter ? keys.slice(1) : keys;
  return rest.length === 0 ? null : rest;
}

function decodeRemoved(f: Fields, where: string, limits: WireLimits): BlockRemoved {
  const hashes = hashList(f("block_hashes"), `${where}.block_hashes`, limits);
  const medium = mediumOf(f("medium"), `${where}.medium`, limits);
  const group = optionalInt(f("group_idx"), `${where}.group_idx`, 0, 1 << 16);
  const rc = f("remaining_copy_counts");
  let remainingCopies: number[] | null = null;
  if (rc !== null && rc !== undefined) {
    if (!Array.isArray(rc) || rc.length !== hashes.length)
      throw new KvWireError(`${where}.remaining_copy_counts must be a list as long as block_hashes`);
    remainingCopies = rc.map((c, i) => int(c, `${where}.remaining_copy_counts[${i}]`, 0, 1 << 30));
  }
  return { type: "BlockRemoved", hashes, medium, group, remainingCopies };
}

function hashList(v: unknown, where: string, limits: WireLimits): BlockHash[] {
  if (!Array.isArray(v)) throw new KvWireError(`${where} is not a list`);
  if (v.length > limits.maxHashesPerEvent)
    throw new KvWireError(`${where} has ${v.length} hashes, limit ${limits.maxHashesPerEvent}`);
  return v.map((h, i) => hash(h, `${where}[${i}]`));
}

const U64_MAX = (1n << 64n) - 1n;
const I64_MIN = -(1n << 63n);
const MAX_HASH_BYTES = 64;

function hash(v: unknown, where: string): BlockHash {
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

function tokenList(v: unknown, where: string, limits: WireLimits): Uint32Array {
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

function mediumOf(v: unknown, where: string, limits: WireLimits): string | null {
  const s = optionalString(v, where, limits);
  return s === null ? null : s.toUpperCase() === "GPU" ? "GPU" : s;
}

function int(v: unknown, where: string, min: number, max: number): number {
  if (typeof v === "bigint" && v >= BigInt(min) && v <= BigInt(max)) return Number(v);
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max)
    throw new KvWireError(`${where} is not an integer in [${min}, ${max}]`);
  return v;
}

function optionalInt(v: unknown, where: string, min: number, max: number): number | null {
  return v === null || v === undefined ? null : int(v, where, min, max);
}

function optionalString(v: unknown, where: string, limits: WireLimits): string | null {
  if (v === null || v === undefined) return null;
  if (typeof v !== "string") throw new KvWireError(`${where} is a ${describe(v)}, expected a string`);
  if (v.length > limits.maxStringLength)
    throw new KvWireError(`${where} is longer than ${limits.maxStringLength}`);
  return v;
}

function describe(v: unknown): string {
  if (v === null) return "nil";
  if (Array.isArray(v)) return "array";
  if (v instanceof Map) return "map";
  if (v instanceof Uint8Array) return "bytes";
  if (typeof v === "string") return `string '${v.slice(0, 40)}'`;
  return typeof v;
}
