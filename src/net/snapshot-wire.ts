/**
 * A snapshot's wire form over HTTP (transport-wire.ts has the table): the core codec's bytes, and the
 * x-prefixmesh-* headers beside them (the ack, the sender's block count, the RTT clock and echo, the
 * served count), each written and read here; a malformed header reads as absent.
 */
import type { IncomingHttpHeaders } from "node:http";
import type { HeldVersion, SnapshotEcho } from "../core/node/types.js";
import type { Snapshot } from "../core/snapshot.js";
import { decodeSnapshot } from "../core/snapshot-codec.js";
import type { Decoded, SnapshotMsg } from "./transport-wire.js";

/**
 * The headers beside a snapshot's bytes: the ack, the sender's block count, the RTT clock and echo,
 * and how many requests the sender has served.
 */
export function snapshotHeaders(m: SnapshotMsg): Record<string, string> {
  const h = formatHolds(m.holds);
  const echo = formatEcho(m.echo);
  return {
    "content-type": "application/octet-stream",
    ...(h ? { "x-prefixmesh-holds": h } : {}),
    ...(m.blocks !== undefined ? { "x-prefixmesh-blocks": String(m.blocks) } : {}),
    ...(m.at !== undefined ? { "x-prefixmesh-at": formatClock(m.at) } : {}),
    ...(echo ? { "x-prefixmesh-echo": echo } : {}),
    ...(m.served !== undefined ? { "x-prefixmesh-served": String(m.served) } : {}),
  };
}

/**
 * A snapshot as it came off the wire: its bytes decoded by the core codec (within `maxBytes`) and its
 * headers read; a malformed header is left out (the node treats the field as absent), a body that
 * does not decode refuses the whole message.
 */
export function snapshotFromWire(
  bytes: Uint8Array,
  headers: IncomingHttpHeaders,
  maxBytes: number,
): Decoded<SnapshotMsg> {
  let snapshot: Snapshot;
  try {
    snapshot = decodeSnapshot(bytes, { maxBytes });
  } catch (err) {
    return { ok: false, error: `bad snapshot: ${(err as Error).message}` };
  }
  return { ok: true, msg: snapshotMsgFromWire(snapshot, headers) };
}

/** A snapshot already decoded by the core codec (possibly on a worker) with its headers read. */
export function snapshotMsgFromWire(snapshot: Snapshot, headers: IncomingHttpHeaders): SnapshotMsg {
  const msg: SnapshotMsg = { type: "snapshot", snapshot };
  const holds = parseHolds(headers["x-prefixmesh-holds"]);
  const blocks = parseCount(headers["x-prefixmesh-blocks"]);
  const at = parseClock(headers["x-prefixmesh-at"]);
  const echo = parseEcho(headers["x-prefixmesh-echo"]);
  const served = parseCount(headers["x-prefixmesh-served"]);
  if (holds) msg.holds = holds;
  if (blocks !== undefined) msg.blocks = blocks;
  if (at !== undefined) msg.at = at;
  if (echo) msg.echo = echo;
  if (served !== undefined) msg.served = served;
  return msg;
}

/** `x-prefixmesh-holds: <epoch>:<version>` — the ack piggybacked on a snapshot. */
export function formatHolds(h: HeldVersion | undefined): string | undefined {
  return h ? `${h.epoch}:${h.version}` : undefined;
}

export function parseHolds(v: string | string[] | undefined): HeldVersion | undefined {
  if (typeof v !== "string" || v.length > 64) return undefined;
  const m = /^(\d{1,16}):(\d{1,16})$/.exec(v);
  if (!m) return undefined;
  const epoch = Number(m[1]);
  const version = Number(m[2]);
  return Number.isSafeInteger(epoch) && Number.isSafeInteger(version) ? { epoch, version } : undefined;
}

/** A clock reading in ms (`x-prefixmesh-at`): finite, non-negative, short; else undefined. */
export function parseClock(v: string | string[] | undefined): number | undefined {
  if (typeof v !== "string" || !/^\d{1,16}(\.\d{1,6})?$/.test(v)) return undefined;
  return Number(v);
}

/**
 * `x-prefixmesh-echo: <t>:<heldMs>` — the receiver's last `at` sent back with how long it was held, so
 * the receiver measures a round trip on its own clock (no clock sync needed).
 */
export function formatEcho(e: SnapshotEcho | undefined): string | undefined {
  return e ? `${formatClock(e.t)}:${formatClock(e.heldMs)}` : undefined;
}

/** Fixed-point with µs resolution: never exponent notation, never more digits than `parseClock` takes. */
export function formatClock(ms: number): string {
  return ms.toFixed(3);
}

export function parseEcho(v: string | string[] | undefined): SnapshotEcho | undefined {
  if (typeof v !== "string" || v.length > 48) return undefined;
  const [t, heldMs, extra] = v.split(":");
  if (extra !== undefined) return undefined;
  const pt = parseClock(t);
  const ph = parseClock(heldMs);
  return pt !== undefined && ph !== undefined ? { t: pt, heldMs: ph } : undefined;
}

/** A small non-negative integer header (e.g. `x-prefixmesh-blocks`), or undefined if absent/invalid. */
export function parseCount(v: string | string[] | undefined): number | undefined {
  if (typeof v !== "string" || !/^\d{1,15}$/.test(v)) return undefined;
  return Number(v);
}
