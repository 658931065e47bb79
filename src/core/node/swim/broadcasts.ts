/**
 * The piggyback queue: membership updates waiting to ride on pings, acks and gossip. One update per
 * member (a newer one replaces the older, as memberlist's invalidation does); each goes out `limit`
 * times (memberlist's retransmit limit, ≈ 4 log10 N), the least-sent first, then it is dropped:
 * epidemic spread needs O(log N) sends per update, not one per member.
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

  get size(): number {
    return this.pending.size;
  }

  push(update: MemberUpdate): void {
    this.pending.set(update.id, { update, sent: 0, order: this.order++ });
  }

  /** The pending update about `id`, if any (the buddy system puts a suspect's own first). */
  about(id: NodeId): MemberUpdate | undefined {
    return this.pending.get(id)?.update;
  }

  /** Up to `max` updates for one message, counting the send; those sent `limit` times are dropped. */
  take(max: number, limit: number, first?: MemberUpdate): MemberUpdate[] {
    const out: MemberUpdate[] = first === undefined ? [] : [first];
    if (this.pending.size === 0 || out.length >= max) return out;
    for (const p of leastSent(this.pending.values(), max - out.length + (first === undefined ? 0 : 1))) {
      if (out.length >= max) break;
      if (p.update === first) continue;
      out.push(p.update);
      if (++p.sent >= limit) this.pending.delete(p.update.id);
    }
    return out;
  }
}

/** a goes before b: sent fewer times, then newer. */
function before(a: Pending, b: Pending): boolean {
  return a.sent < b.sent || (a.sent === b.sent && a.order > b.order);
}

/**
 * The `k` first pending updates in (least sent, newest) order, in that order: one pass keeping a
 * sorted array of at most k (a message takes ~16 of up to N queued while a cluster forms; sorting
 * the whole queue per message was the simulator's hottest path at 256 nodes).
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
