/**
 * The 8-byte big-endian sequence numbers of the KV-event streams: the middle frame of each PUB
 * message, the first number a replay request asks for, and the replay's end marker (wire.ts has the
 * format).
 */
import { KvWireError } from "./wire-types.js";

/** The replay endpoint's end-of-replay marker. */
export const END_OF_REPLAY = -1;

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

/**
 * SGLang's publisher with a snapshot endpoint appends `\0sgl-kv-epoch=EPOCH` to the topic frame (and
 * `\0sgl-kv-snapshot=ID` to its snapshot barriers, empty batches numbered like the rest); EPOCH names
 * the publisher's life, so another one is a restarted publisher. SUB filters by prefix, so these come.
 */
const EPOCH_MARKER = Buffer.from("\u0000sgl-kv-epoch=", "utf8");
const SNAPSHOT_MARKER = Buffer.from("\u0000sgl-kv-snapshot=", "utf8");

/**
 * Whether the topic frame is `topic`'s: null for another topic, else the publisher's epoch when the
 * frame carries one.
 */
export function topicOf(frame: Buffer, topic: Buffer): { epoch: string | undefined } | null {
  if (frame.equals(topic)) return { epoch: undefined };
  const marker = topic.length + EPOCH_MARKER.length;
  if (frame.length <= marker || !frame.subarray(0, topic.length).equals(topic)) return null;
  if (!frame.subarray(topic.length, marker).equals(EPOCH_MARKER)) return null;
  const rest = frame.subarray(marker);
  const at = rest.indexOf(SNAPSHOT_MARKER);
  const epoch = (at < 0 ? rest : rest.subarray(0, at)).toString("utf8");
  return epoch === "" ? null : { epoch };
}
