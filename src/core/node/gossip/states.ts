/**
 * Which states of an owner a Scuttlebutt peer lacks (scuttlebutt.ts): our own tree as a delta from
 * the peer's version or whole, and a relayed owner as its logged delta chain netted into one, or its
 * whole key set while our estimate is exact. Pure selection over what the caller holds, kept apart
 * from scuttlebutt.ts's rounds, wants and admission so each stays one job.
 */
import { invariant } from "../../invariant.js";
import type { Snapshot, SnapshotBody, SnapshotDelta, SnapshotHeader } from "../../snapshot.js";

/** An (epoch, version) of an owner's tree: what a digest lists, or what we hold. */
type Held = { epoch: number; version: number };

/**
 * One owner's state as relayed: the snapshot, and the owner's block count at its version, by which a
 * receiver tells an exact estimate from one holding a wrong guess (then it asks for the whole set).
 * -1: not known (a delta inside a relayed chain).
 */
export interface OwnerState {
  snapshot: Snapshot;
  blocks: number;
}

/** Our own tree as the gossip needs it (RadixTree satisfies it; headers carry our load). */
export interface OwnState {
  header(): SnapshotHeader;
  /** Block keys in our tree now. */
  blocks(): number;
  changesSince(version: number): SnapshotDelta | undefined;
  snapshotBody(): SnapshotBody;
}

/** What we keep per relayed owner. */
export interface OwnerLog {
  /** The header of the newest state we applied (its load figures and tokenCount). */
  header: SnapshotHeader;
  /** Consecutive deltas, oldest first, ending at header.version. */
  deltas: SnapshotDelta[];
  /** The owner's block count at header.version. */
  blocks: number;
  /** Our estimate is exactly the owner's tree at header.version (no optimistic insert since). */
  clean: boolean;
  /** Our estimate holds a wrong guess: our digest asks for the whole set (version 0). */
  wantFull: boolean;
  /** With push to holders: our round in which the newest state was applied (holder-push.ts). */
  round?: number;
  /** The newest state whose apply waits for steps (Estimates "deferred"): logged once it is in. */
  deferred?: { snapshot: Snapshot; blocks: number };
}

/**
 * Our state for a peer holding `e` of us (undefined: nothing): none if it is up to date, a delta
 * from its version if our tree still has one, else the whole set. Version 0 asks for the whole set
 * (a new owner, or an estimate with a wrong guess).
 */
export function ownState(e: Held | undefined, self: OwnState): OwnerState | undefined {
  const h = self.header();
  const blocks = self.blocks();
  if (e !== undefined && e.epoch === h.epoch && e.version >= h.version) return undefined;
  if (e !== undefined && e.epoch === h.epoch && e.version > 0) {
    const delta = self.changesSince(e.version);
    if (delta !== undefined) return { snapshot: { kind: "delta", header: h, delta }, blocks };
  }
  return { snapshot: { kind: "full", header: h, body: self.snapshotBody() }, blocks };
}

/**
 * A relayed owner's state for a peer holding `e` of it (undefined: nothing), given what we hold
 * (`held`) and our log of it; `body(owner)` makes its whole key set from our estimate. Undefined: nothing.
 */
export function relayState<O>(
  log: OwnerLog,
  held: Held | undefined,
  e: Held | undefined,
  body: (owner: O) => SnapshotBody,
  owner: O,
): OwnerState | undefined {
  if (held === undefined || held.epoch !== log.header.epoch) return undefined;
  if (e !== undefined && (e.epoch > held.epoch || (e.epoch === held.epoch && e.version >= held.version)))
    return undefined;
  if (e !== undefined && e.epoch === held.epoch && e.version > 0) {
    const i = log.deltas.findIndex((d) => d.baseVersion === e.version);
    // The chain from the peer's version, netted into one delta (as the owner nets its own).
    if (i >= 0)
      return {
        snapshot: { kind: "delta", header: log.header, delta: netDeltas(log.deltas.slice(i)) },
        blocks: log.blocks,
      };
    // A peer that holds a version our log cannot build on gets nothing from us rather than the whole
    // set: the owner's deltas are netted (5 → 9), so relays' logs rarely share bases, and a full per
    // miss made whole key sets most of the bytes. The owner, or a relay with that base, serves it.
    return undefined;
  }
  if (!log.clean) return undefined;
  return { snapshot: { kind: "full", header: log.header, body: body(owner) }, blocks: log.blocks };
}

/**
 * Consecutive deltas (each exact: `added` not in its base, `removed` in it) as one exact delta from the
 * first's base to the last's version: a key added then removed, or removed then added, cancels.
 */
export function netDeltas(chain: readonly SnapshotDelta[]): SnapshotDelta {
  invariant(chain.length > 0, "netDeltas of an empty chain");
  if (chain.length === 1) return chain[0] as SnapshotDelta;
  const added = new Set<number>();
  const removed = new Set<number>();
  let version = (chain[0] as SnapshotDelta).baseVersion;
  for (const d of chain) {
    invariant(d.baseVersion === version, "netDeltas of a chain with a gap");
    version = d.version;
    for (const k of d.removed) if (!added.delete(k)) removed.add(k);
    for (const k of d.added) if (!removed.delete(k)) added.add(k);
  }
  const base = (chain[0] as SnapshotDelta).baseVersion;
  return { baseVersion: base, version, added: Float64Array.from(added), removed: Float64Array.from(removed) };
}

/** Up to `k` distinct items of `from`, at random (`from` is reordered). */
export function pickRandom<T>(from: T[], k: number, random: () => number): T[] {
  const n = Math.min(Math.max(0, k), from.length);
  for (let i = 0; i < n; i++) {
    const j = i + Math.floor(random() * (from.length - i));
    const t = from[i] as T;
    from[i] = from[j] as T;
    from[j] = t;
  }
  return from.slice(0, n);
}

/**
 * `k` distinct items of `from` drawn uniformly (draw order; k capped at its length), leaving `from`
 * as it is: rejection sampling, cheap while k ≪ its length (a fanout out of the live members).
 */
export function pickDistinct<T>(from: readonly T[], k: number, random: () => number): T[] {
  const n = from.length;
  const picked = new Set<T>();
  while (picked.size < Math.min(k, n)) picked.add(from[Math.floor(random() * n)] as T);
  return [...picked];
}
