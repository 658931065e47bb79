/**
 * The piggyback queue: membership updates waiting to ride on pings, acks and gossip. One update per
 * member (a newer one replaces the older, as memberlist's invalidation does); each goes out `limit`
 * times (memberlist's retransmit limit, ≈ 4 log10 N), the least-sent first, then it is dropped:
 * epidemic spread needs O(log N) sends per update, not one per member.
 *
 * Updates are kept in buckets by times sent, each bucket oldest first, so a message takes its few
 * updates from the buckets' tails without a pass over the whole queue: while a large cluster forms
 * every node queues an update per member, and scanning them all per message grew as N² per node.
 */
import type { MemberUpdate, NodeId } from "./types.js";

export interface Pending {
  update: MemberUpdate;
  sent: number;
  /** Insertion order: among equally-sent updates, the newest goes first. */
  order: number;
}

export class Broadcasts {
  private readonly pending = new Map<NodeId, Pending>();
  private order = 0;
  /**
   * buckets[s]: updates sent s times, ascending `order`. An entry is stale (skipped, dropped when
   * met at a tail or by `compact`) once its update was sent again, replaced or dropped.
   */
  private buckets: Pending[][] = [];
  /** Entries in all buckets, stale ones included. */
  private entries = 0;

  get size(): number {
    return this.pending.size;
  }

  push(update: MemberUpdate): void {
    const p = { update, sent: 0, order: this.order++ };
    this.pending.set(update.id, p);
    // The newest order of all: it goes at bucket 0's tail.
    this.bucket(0).push(p);
    this.entries++;
    if (this.entries > 2 * this.pending.size + 64) this.compact();
  }

  /** The pending update about `id`, if any (the buddy system puts a suspect's own first). */
  about(id: NodeId): MemberUpdate | undefined {
    return this.pending.get(id)?.update;
  }

  /** Up to `max` updates for one message, counting the send; those sent `limit` times are dropped. */
  take(max: number, limit: number, first?: MemberUpdate): MemberUpdate[] {
    const out: MemberUpdate[] = first === undefined ? [] : [first];
    if (this.pending.size === 0 || out.length >= max) return out;
    const top = this.top(max - out.length + (first === undefined ? 0 : 1));
    for (const p of top) {
      if (out.length >= max) break;
      if (p.update === first) continue;
      out.push(p.update);
      if (++p.sent >= limit) this.pending.delete(p.update.id);
      else this.insert(p);
    }
    for (let s = 0; s < this.buckets.length; s++) this.trim(s);
    if (this.entries > 2 * this.pending.size + 64) this.compact();
    return out;
  }

  /** The `k` first pending updates in (least sent, newest) order: leastSent over the queue. */
  private top(k: number): Pending[] {
    const top: Pending[] = [];
    for (let s = 0; s < this.buckets.length && top.length < k; s++) {
      const b = this.buckets[s] as Pending[];
      for (let i = b.length - 1; i >= 0 && top.length < k; i--) {
        const p = b[i] as Pending;
        if (this.live(p, s)) top.push(p);
      }
    }
    return top;
  }

  private live(p: Pending, s: number): boolean {
    return p.sent === s && this.pending.get(p.update.id) === p;
  }

  private bucket(s: number): Pending[] {
    while (this.buckets.length <= s) this.buckets.push([]);
    return this.buckets[s] as Pending[];
  }

  /** `p` into its bucket, at its place by order (a binary search: an old update belongs near the head). */
  private insert(p: Pending): void {
    const b = this.bucket(p.sent);
    let lo = 0;
    let hi = b.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((b[mid] as Pending).order < p.order) lo = mid + 1;
      else hi = mid;
    }
    if (lo === b.length) b.push(p);
    else b.splice(lo, 0, p);
    this.entries++;
  }

  /** Drops the stale entries at bucket s's tail (where takes happen). */
  private trim(s: number): void {
    const b = this.buckets[s] as Pending[];
    while (b.length > 0 && !this.live(b[b.length - 1] as Pending, s)) {
      b.pop();
      this.entries--;
    }
  }

  /** Rebuilds the buckets from the pending updates alone (stale entries gone). */
  private compact(): void {
    const buckets: Pending[][] = [];
    for (const p of this.pending.values()) {
      while (buckets.length <= p.sent) buckets.push([]);
      (buckets[p.sent] as Pending[]).push(p);
    }
    for (const b of buckets) b.sort((x, y) => x.order - y.order);
    this.buckets = buckets;
    this.entries = this.pending.size;
  }
}

/** a goes before b: sent fewer times, then newer. */
function before(a: Pending, b: Pending): boolean {
  return a.sent < b.sent || (a.sent === b.sent && a.order > b.order);
}

/**
 * The `k` first pending updates in (least sent, newest) order, in that order: one pass keeping a
 * sorted array of at most k (the reference `Broadcasts.take` must agree with).
 */
export function leastSent(all: Iterable<Pending>, k: number): Pending[] {
  const top: Pending[] = [];
  if (k <= 0) return top;
  for (const p of all) {
    if (top.length === k && !before(p, top[k - 1] as Pending)) continue;
    let i = top.length === k ? k - 1 : top.length;
    while (i > 0 && before(p, top[i - 1] as Pending)) {
      top[i] = top[i - 1] as Pending;
      i--;
    }
    top[i] = p;
  }
  return top;
}
