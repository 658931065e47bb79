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
 *
 * Here: the batch and each event's tag and encoding. Beside it: the events' fields (event-fields.ts),
 * single values' checks (wire-checks.ts), sequence-number frames (sequence-frame.ts), and the decoded
 * types and limits (wire-types.ts).
 */
import { Unpackr } from "msgpackr";
import { decodeRemoved, decodeStored, type Fields } from "./event-fields.js";
import { describe, optionalInt } from "./wire-checks.js";
import {
  DEFAULT_WIRE_LIMITS,
  type KvEvent,
  type KvEventBatch,
  KvWireError,
  type WireLimits,
} from "./wire-types.js";

/**
 * No records, no structured-clone references, maps as Map (keys of any type, no prototype), 64-bit
 * integers as bigint (hashes exceed 2^53). Other msgpack extensions decode to objects the field
 * checks (event-fields.ts, wire-checks.ts) reject.
 */
const unpackr = new Unpackr({
  useRecords: false,
  mapsAsObjects: false,
  int64AsType: "bigint",
  structuredClone: false,
  moreTypes: false,
});

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
  let tail: readonly unknown[] = [];
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
      // Fields past the ones we know: a newer or another engine's extension (event-fields.ts).
      tail = raw.slice(1 + STORED_POSITIONS.length);
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
      return decodeStored(fields, where, limits, positional, tail);
    case "BlockRemoved":
      return decodeRemoved(fields, where, limits);
    case "AllBlocksCleared":
      return { type: "AllBlocksCleared" };
    default:
      throw new KvWireError(`${where}: unknown event type ${describe(tag)}`);
  }
}
