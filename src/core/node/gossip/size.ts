/**
 * Exact bytes of a Scuttlebutt message in its wire format: one type byte; a digest is its room (a
 * varint: how many new owners its sender takes), with type & 2 its sender's queue depth and push-back
 * (varints), with type & 4 its sender's summary tag (a varint), and a varint count of entries (owner as a
 * length byte + ASCII, epoch and version as varints); a states message is a varint count of length-prefixed
 * compact snapshot frames (snapshot-codec.ts frames, `encodedSize`, less what codec.ts leaves out), and the
 * owner's block count; then its wants as digest entries. A summary: summary.ts; hints: hints.ts.
 */
import { encodedSize } from "../../snapshot-codec.js";
import { varintSize } from "../../varint.js";
import { hintsSize } from "./hints.js";
import type { DigestEntry, OwnerState } from "./scuttlebutt.js";
import { type MeshGossip, summarySize } from "./summary.js";

function entriesSize(es: readonly DigestEntry[]): number {
  let n = varintSize(es.length);
  for (const e of es) n += 1 + e.owner.length + varintSize(e.epoch) + varintSize(e.version);
  return n;
}

/**
 * Bytes of a snapshot frame a compact frame leaves out (codec.ts): magic 4, format version 1, block
 * size 1, CRC 4.
 */
export const COMPACT_DROPPED = 10;

/** One state inside a states message: its compact frame's length, that frame, the owner's block count. */
export function stateSize(s: OwnerState): number {
  const b = encodedSize(s.snapshot) - COMPACT_DROPPED;
  // The block count as a zigzag varint (-1 = unknown).
  return varintSize(b) + b + varintSize(s.blocks < 0 ? 1 : 2 * s.blocks);
}

export function gossipSize(msg: MeshGossip): number {
  if (msg.type === "summary") return 1 + summarySize(msg);
  if (msg.type === "hints") return 1 + hintsSize(msg);
  if (msg.type === "digest")
    return (
      1 +
      varintSize(msg.room) +
      (msg.load ? varintSize(msg.load.queueDepth) + varintSize(msg.load.pushBackMs) : 0) +
      (msg.summary === undefined ? 0 : varintSize(msg.summary)) +
      entriesSize(msg.entries)
    );
  let n = 1 + varintSize(msg.states.length);
  for (const s of msg.states) n += stateSize(s);
  return n + entriesSize(msg.wants);
}
