/**
 * Where the mesh bytes go, part by part (a measurement, not part of the protocol): each SWIM and
 * Scuttlebutt message is split into what its bytes carry — SWIM's own fields vs its piggybacked
 * member updates; a digest's fixed head vs its entries (renewal digests apart); each state by who
 * sends it (the owner's own push vs a relay) and kind (delta vs whole key set), with the key bytes
 * inside counted again as `keys`; wants. Given what the receiver holds before the message lands, a
 * state it already holds at that version or newer is counted again as `redundant-*` (it will be
 * ignored as a duplicate or old). Sizes are the codecs' own (gossip/size.ts, swim/codec.ts), so the
 * parts of a message sum to its bytes (keys and redundant-* excepted: they are within the others).
 */

import { gossipSize, stateSize } from "../core/node/gossip/size.js";
import type { MeshGossip } from "../core/node/gossip/summary.js";
import { swimSize } from "../core/node/swim/codec.js";
import type { MemberUpdate } from "../core/node/swim/types.js";
import type { MeshMessage } from "../core/node/types.js";
import { KEY_BYTES } from "../core/snapshot-codec.js";
import { varintSize } from "../core/varint.js";

export type MeshParts = Record<string, { count: number; bytes: number }>;

type Held = { epoch: number; version: number } | undefined;

function add(into: MeshParts, part: string, bytes: number, count = 1): void {
  const t = into[part] ?? { count: 0, bytes: 0 };
  into[part] = t;
  t.count += count;
  t.bytes += bytes;
}

/** Parts summed over buckets [start, end) of `byTime` (default: all), in order of first appearance. */
export function sumMeshParts(byTime: readonly MeshParts[], start = 0, end = byTime.length): MeshParts {
  const out: MeshParts = {};
  for (let i = start; i < end; i++)
    for (const [part, t] of Object.entries(byTime[i] ?? {})) add(out, part, t.bytes, t.count);
  return out;
}

function piggyback(us: readonly MemberUpdate[]): number {
  return (
    swimSize({ type: "gossip", updates: us as MemberUpdate[] }) - swimSize({ type: "gossip", updates: [] })
  );
}

/**
 * Adds message `m` from `from` to `into`; `heldBy(owner)`: what the receiver holds of `owner` before
 * the message lands (undefined: redundancy not counted).
 */
export function addMeshParts(
  into: MeshParts,
  m: MeshMessage,
  from: string,
  heldBy?: (owner: string) => Held,
): void {
  // The channel byte of a mesh datagram (message-size.ts's meshBytes).
  add(into, "channel", 1);
  if (m.channel === "swim") {
    const total = swimSize(m.msg);
    const pb = "updates" in m.msg ? piggyback(m.msg.updates) : 0;
    add(into, `swim-${m.msg.type}`, total - pb);
    if (pb > 0) add(into, "swim-piggyback", pb, (m.msg as { updates: MemberUpdate[] }).updates.length);
    return;
  }
  addGossipParts(into, m.msg, from, heldBy);
}

export function addGossipParts(
  into: MeshParts,
  msg: MeshGossip,
  from: string,
  heldBy?: (owner: string) => Held,
): void {
  const total = gossipSize(msg);
  if (msg.type === "summary" || msg.type === "hints") {
    add(into, msg.type, total);
    return;
  }
  if (msg.type === "digest") {
    // A holder's one-entry renewal to an owner (holders.ts), apart from round digests: it names the
    // owner, where every other digest starts with its sender (a node's carry its load too).
    if (msg.entries.length === 1 && msg.entries[0]?.owner !== from) {
      add(into, "digest-renewal", total);
      return;
    }
    const head = gossipSize({ ...msg, entries: [] });
    add(into, "digest-head", head);
    add(into, "digest-entries", total - head, msg.entries.length);
    return;
  }
  let stateBytes = 0;
  for (const s of msg.states) {
    const b = stateSize(s);
    stateBytes += b;
    const who = s.snapshot.header.sender === from ? "push" : "relay";
    const kind = s.snapshot.kind === "full" ? "full" : "delta";
    add(into, `${who}-${kind}`, b);
    const keys =
      s.snapshot.kind === "full"
        ? s.snapshot.body.keys.length
        : s.snapshot.kind === "delta"
          ? s.snapshot.delta.added.length + s.snapshot.delta.removed.length
          : 0;
    add(into, "keys", KEY_BYTES * keys, keys);
    const held = heldBy?.(s.snapshot.header.sender);
    const h = s.snapshot.header;
    if (held !== undefined && (held.epoch > h.epoch || (held.epoch === h.epoch && held.version >= h.version)))
      add(into, `redundant-${who}-${kind}`, b);
  }
  const wants = total - stateBytes - 1 - varintSize(msg.states.length);
  add(into, "states-head", 1 + varintSize(msg.states.length));
  add(into, "wants", wants, msg.wants.length);
}
