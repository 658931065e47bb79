/**
 * Each member's count of the requests it has served, as its snapshots report it (`served`,
 * peer-messages.ts): what `/cluster` shows per member so a dashboard on any node draws the cluster-wide
 * share of requests by serving node (the paper's Figure 3), not only the share of those entering
 * here. Observability only: routing never reads it.
 *
 * A count belongs to its sender's epoch (counters start again at a restart): a newer epoch replaces
 * it, an older one is ignored, and within an epoch it only grows, so snapshots that arrive out of
 * order never move it back. So a member declared dead that refutes it (the same process, epoch and
 * counter) keeps its count: it was shown, down, while SWIM remembered it dead, and goes on growing;
 * only SWIM forgetting the member (`keepOnly`), or its removal from a static or DNS list, drops it.
 */
import { invariant } from "../../core/invariant.js";

/** Members whose counts are kept; a node never has more peers than this (`maxPeers` is bounded). */
export const MAX_COUNTED_PEERS = 4096;

interface Count {
  epoch: number;
  served: number;
}

export class PeerServedCounts {
  private readonly counts = new Map<string, Count>();
  /** A newcomer's count was refused at the bound since `keepOnly` last walked the counts. */
  private full = false;

  /** `from`'s snapshot of epoch `epoch` said it has served `served` requests (undefined: it did not say). */
  report(from: string, epoch: number, served: number | undefined): void {
    if (served === undefined || !Number.isSafeInteger(served) || served < 0) return;
    const c = this.counts.get(from);
    if (c === undefined) {
      if (this.counts.size >= MAX_COUNTED_PEERS) {
        this.full = true;
        return;
      }
      this.counts.set(from, { epoch, served });
    } else if (epoch > c.epoch) {
      c.epoch = epoch;
      c.served = served;
    } else if (epoch === c.epoch && served > c.served) c.served = served;
    invariant(this.counts.size <= MAX_COUNTED_PEERS, "served counts kept beyond the bound");
  }

  /** What `id` last reported of its served requests; null if it never did (or runs an older version). */
  of(id: string): number | null {
    return this.counts.get(id)?.served ?? null;
  }

  /** A member that left the membership. */
  forget(id: string): void {
    this.counts.delete(id);
  }

  /**
   * gossip "scuttlebutt": the members SWIM remembers, dead and departed ones included (`/cluster`
   * shows those down, with their count); others' counts go, so a mesh whose members come and go
   * never fills the bound with the long gone and stops counting newcomers.
   */
  keepOnly(remembered: ReadonlySet<string>): void {
    // No more kept than remembered: at most that many long gone (bounded), skip the walk — unless a
    // newcomer was refused for room, which those long gone may be taking (SWIM may remember as many
    // members as are counted, or more).
    if (this.counts.size <= remembered.size && !this.full) return;
    this.full = false;
    for (const id of this.counts.keys()) if (!remembered.has(id)) this.counts.delete(id);
  }
}
