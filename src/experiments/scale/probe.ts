/**
 * The scale experiment's observer (src/sim/probe.ts): it only reads the nodes. It times how long
 * one change of an owner's tree takes to reach 50 / 99 / 100 % of the other live nodes, when the
 * members notice a crashed node, how often a live member is seen suspected, when the cluster has
 * formed (every node routes to every other), and the live heap once the cluster is at full load.
 */
import type { PrefixNode } from "../../core/node/node.js";
import type { SimProbe } from "../../sim/probe.js";
import { liveHeapBytes } from "./heap.js";

/** Detection is read at this resolution (each read walks every node's member views). */
export const DETECT_EVERY_MS = 100;

export interface Spread {
  owner: string;
  /** Virtual ms at which the probe saw the owner's tree change. */
  changedAtMs: number;
  /** ms after the change until ≥ 50 % / ≥ 99 % / all other live nodes held it (undefined: not within the window). */
  p50Ms?: number;
  p99Ms?: number;
  p100Ms?: number;
}

export interface Detection {
  crashedAtMs: number;
  /** Members alive at the crash that knew the crashed node. */
  observers: number;
  /** Of them, those that saw it not live (suspected or down) before the run ended. */
  noticed: number;
  firstMs?: number;
  lastMs?: number;
}

export interface ProbeOptions {
  ids: readonly string[];
  everyMs: number;
  /** First tracked change at or after this time; then one every `changeEveryMs`. */
  firstChangeMs: number;
  changeEveryMs: number;
  changes: number;
  /** Give up on a change after this long. */
  windowMs: number;
  crash?: { node: number; atMs: number };
  /** Every this many ms, every node's view of every member is read for suspicions of live members. */
  suspicionEveryMs: number;
  /** When the live heap is read (with a GC, once). */
  heapAtMs: number;
  /** Spread counts only the nodes holding an estimate of the owner (--max-estimates: not all do). */
  holdersOnly?: boolean;
}

interface Track extends Spread {
  ownerIdx: number;
  version: number;
  epoch: number;
}

export class ScaleProbe implements SimProbe {
  readonly everyMs: number;
  readonly spreads: Spread[] = [];
  detection?: Detection;
  /** (observer, member) episodes of a live member seen suspected or down, sampled. */
  falseSuspicions = 0;
  /**
   * Virtual ms at which every live node first saw every other live node live and held an estimate
   * of it (could route to it), read every DETECT_EVERY_MS; undefined: not within the run.
   */
  formedAtMs?: number;
  /** The same for 99% of the (live node, other live node) pairs: formation without its last stragglers. */
  formed99AtMs?: number;
  /**
   * Membership alone: virtual ms at which every live node first saw every other live node live (with
   * --max-estimates a node never holds every estimate, so `formedAtMs` cannot mark its start-up).
   */
  membersFormedAtMs?: number;
  private nextFormed = 0;
  heapBytes?: number;
  private readonly waiting: { ownerIdx: number; base: number; epoch: number; since: number }[] = [];
  private readonly active: Track[] = [];
  private nextChange: number;
  private started = 0;
  private nextSuspicion: number;
  private readonly suspected = new Set<string>();
  private readonly noticedBy = new Map<string, number>();
  private knewCrashed: Set<string> | undefined;
  private nextDetect = 0;

  constructor(private readonly o: ProbeOptions) {
    this.everyMs = o.everyMs;
    this.nextChange = o.firstChangeMs;
    this.nextSuspicion = o.suspicionEveryMs;
  }

  observe(now: number, nodes: readonly (PrefixNode | null)[]): void {
    this.startChanges(now, nodes);
    this.spread(now, nodes);
    if ((this.formedAtMs === undefined || this.membersFormedAtMs === undefined) && now >= this.nextFormed) {
      this.nextFormed = now + DETECT_EVERY_MS;
      const { routable, live } = routableShare(nodes);
      if (this.formed99AtMs === undefined && routable >= 0.99) this.formed99AtMs = now;
      if (this.formedAtMs === undefined && routable >= 1) this.formedAtMs = now;
      if (this.membersFormedAtMs === undefined && live >= 1) this.membersFormedAtMs = now;
    }
    if (this.o.crash && now >= this.nextDetect) {
      this.nextDetect = now + DETECT_EVERY_MS;
      this.detect(now, nodes, this.o.crash);
    }
    if (now >= this.nextSuspicion) {
      this.nextSuspicion += this.o.suspicionEveryMs;
      this.suspicions(nodes);
    }
    if (this.heapBytes === undefined && now >= this.o.heapAtMs) this.heapBytes = liveHeapBytes();
  }

  private startChanges(now: number, nodes: readonly (PrefixNode | null)[]): void {
    if (this.started < this.o.changes && now >= this.nextChange) {
      // Owners taken in turn across the cluster, skipping the one that will crash.
      const n = nodes.length;
      let idx = Math.floor((this.started * n) / Math.max(1, this.o.changes) + 1) % n;
      if (idx === this.o.crash?.node) idx = (idx + 1) % n;
      const node = nodes[idx];
      if (node) {
        this.waiting.push({ ownerIdx: idx, base: node.treeVersion(), epoch: node.currentEpoch, since: now });
        this.started++;
      }
      this.nextChange += this.o.changeEveryMs;
    }
    for (let i = this.waiting.length - 1; i >= 0; i--) {
      const w = this.waiting[i] as (typeof this.waiting)[number];
      const node = nodes[w.ownerIdx];
      if (!node || now - w.since > this.o.windowMs) {
        this.waiting.splice(i, 1);
        continue;
      }
      if (node.treeVersion() === w.base && node.currentEpoch === w.epoch) continue;
      this.waiting.splice(i, 1);
      const t: Track = {
        owner: node.id,
        ownerIdx: w.ownerIdx,
        changedAtMs: now,
        version: node.treeVersion(),
        epoch: node.currentEpoch,
      };
      this.active.push(t);
      this.spreads.push(t);
    }
  }

  private spread(now: number, nodes: readonly (PrefixNode | null)[]): void {
    for (let i = this.active.length - 1; i >= 0; i--) {
      const t = this.active[i] as Track;
      let others = 0;
      let holding = 0;
      for (let j = 0; j < nodes.length; j++) {
        const n = nodes[j];
        if (!n || j === t.ownerIdx) continue;
        const h = n.heldOf(t.owner);
        if (this.o.holdersOnly && h === undefined) continue;
        others++;
        if (h && (h.epoch > t.epoch || (h.epoch === t.epoch && h.version >= t.version))) holding++;
      }
      const dt = now - t.changedAtMs;
      const share = others === 0 ? 1 : holding / others;
      if (t.p50Ms === undefined && share >= 0.5) t.p50Ms = dt;
      if (t.p99Ms === undefined && share >= 0.99) t.p99Ms = dt;
      if (t.p100Ms === undefined && share >= 1) t.p100Ms = dt;
      if (t.p100Ms !== undefined || dt > this.o.windowMs) {
        this.active.splice(i, 1);
        // Exported without the bookkeeping fields.
        const k = this.spreads.indexOf(t);
        this.spreads[k] = {
          owner: t.owner,
          changedAtMs: t.changedAtMs,
          ...(t.p50Ms === undefined ? {} : { p50Ms: t.p50Ms }),
          ...(t.p99Ms === undefined ? {} : { p99Ms: t.p99Ms }),
          ...(t.p100Ms === undefined ? {} : { p100Ms: t.p100Ms }),
        };
      }
    }
  }

  private detect(
    now: number,
    nodes: readonly (PrefixNode | null)[],
    crash: { node: number; atMs: number },
  ): void {
    const id = this.o.ids[crash.node] as string;
    if (now < crash.atMs) return;
    if (!this.knewCrashed) {
      // The first observation after the crash: who knew it then (the members that can notice).
      this.knewCrashed = new Set();
      for (const n of nodes) if (n && n.id !== id && n.memberIds().includes(id)) this.knewCrashed.add(n.id);
    }
    if (this.noticedBy.size >= this.knewCrashed.size) return;
    for (const n of nodes) {
      if (!n || !this.knewCrashed.has(n.id) || this.noticedBy.has(n.id)) continue;
      const liveness = n.memberIds().includes(id) ? n.livenessOf(id) : undefined;
      if (liveness === undefined || liveness === "suspected" || liveness === "down")
        this.noticedBy.set(n.id, now - crash.atMs);
    }
    let first: number | undefined;
    let last: number | undefined;
    for (const t of this.noticedBy.values()) {
      first = first === undefined ? t : Math.min(first, t);
      last = last === undefined ? t : Math.max(last, t);
    }
    const everyone = this.noticedBy.size === this.knewCrashed.size;
    this.detection = {
      crashedAtMs: crash.atMs,
      observers: this.knewCrashed.size,
      noticed: this.noticedBy.size,
      ...(first === undefined ? {} : { firstMs: first }),
      ...(everyone && last !== undefined ? { lastMs: last } : {}),
    };
  }

  private suspicions(nodes: readonly (PrefixNode | null)[]): void {
    const crashed = this.o.crash ? this.o.ids[this.o.crash.node] : undefined;
    const alive = new Set<string>();
    for (const n of nodes) if (n) alive.add(n.id);
    const now = new Set<string>();
    for (const n of nodes) {
      if (!n) continue;
      // Ids and liveness only: a PeerView per pair per sample was most of a 1,024-node cell.
      for (const id of n.memberIds()) {
        if (id === crashed || !alive.has(id)) continue;
        const liveness = n.livenessOf(id);
        if (liveness !== "suspected" && liveness !== "down") continue;
        const key = `${n.id}>${id}`;
        now.add(key);
        if (!this.suspected.has(key)) this.falseSuspicions++;
      }
    }
    this.suspected.clear();
    for (const k of now) this.suspected.add(k);
  }
}

/**
 * Shares of the (live node, other live node) pairs where the node sees the other live and holds its
 * estimate (`routable`), and where it sees it live (`live`).
 */
function routableShare(nodes: readonly (PrefixNode | null)[]): { routable: number; live: number } {
  const alive = new Set<string>();
  for (const n of nodes) if (n) alive.add(n.id);
  if (alive.size < 2) return { routable: 1, live: 1 };
  let routable = 0;
  let live = 0;
  for (const n of nodes) {
    if (!n) continue;
    for (const id of n.memberIds()) {
      if (!alive.has(id) || n.livenessOf(id) !== "live") continue;
      live++;
      if (n.heldOf(id) !== undefined) routable++;
    }
  }
  const pairs = alive.size * (alive.size - 1);
  return { routable: routable / pairs, live: live / pairs };
}
