/**
 * The piggyback queue: membership updates waiting to ride on pings, acks and gossip. One update per
 * member (a newer one replaces the older, as memberlist's invalidation does); each goes out `limit`
 * times (memberlist's retransmit limit, ≈ 4 log10 N), the least-sent first, then it is dropped:
 * epidemic spread needs O(log N) sends per update, not one per member.
 */
import type { MemberUpdate, NodeId } from "./types.js";

interface Pending {
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
    const all = [...this.pending.values()];
    if (all.length > max - out.length) all.sort((a, b) => a.sent - b.sent || b.order - a.order);
    for (const p of all) {
      if (out.length >= max) break;
      if (p.update === first) continue;
      out.push(p.update);
      if (++p.sent >= limit) this.pending.delete(p.update.id);
    }
    return out;
  }
}
