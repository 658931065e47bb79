/**
 * SWIM's candidates (owned by one Swim, swim.ts): ids heard of from anyone, not yet verified by this
 * node. Only a yes to our own `verify-member` lets one join, so an unverified peer can name ids but
 * never put them in the member table; everything here is bounded, since any peer can name as many ids
 * as it likes.
 *
 * At most `maxCandidates` verifications are in flight; further ids wait in a FIFO queue (at most
 * `maxQueuedCandidates`) and are verified as earlier ones settle. Dropping them instead lost most of
 * a joiner's member list (and most of the joiners a seed hears of at a cluster's start), which then
 * trickled in by gossip and periodic push-pulls over tens of seconds.
 */
import type { SwimConfig } from "./config.js";
import type { NodeId, SwimEffect, SwimStats } from "./types.js";

export class Candidates {
  /** Being verified: id → highest incarnation heard. */
  private readonly heard = new Map<NodeId, number>();
  /** Waiting for a verification slot, oldest first: id → highest incarnation heard. */
  private readonly queued = new Map<NodeId, number>();
  /** Candidates named by a member list we asked for (joining): told we are alive once verified. */
  private readonly announce = new Set<NodeId>();
  private readonly refused = new Set<NodeId>();
  /** Ids ever made candidates: a rise across a message says it named someone new to us. */
  named = 0;

  constructor(
    private readonly selfId: NodeId,
    private readonly config: SwimConfig,
    private readonly isMember: (id: NodeId) => boolean,
    private readonly stats: SwimStats,
  ) {}

  /** Makes `id` a candidate (verified now, or queued for a slot); false if refused or no room. */
  name(id: NodeId, incarnation: number, out: SwimEffect[]): boolean {
    if (id === this.selfId || this.isMember(id) || this.refused.has(id)) return false;
    for (const m of [this.heard, this.queued]) {
      const cur = m.get(id);
      if (cur === undefined) continue;
      if (incarnation > cur) m.set(id, incarnation);
      return true;
    }
    this.named++;
    if (this.heard.size < this.config.maxCandidates) {
      this.heard.set(id, incarnation);
      out.push({ type: "verify-member", id });
      return true;
    }
    if (this.queued.size >= this.config.maxQueuedCandidates) {
      this.stats.candidatesDropped++;
      return false;
    }
    this.queued.set(id, incarnation);
    return true;
  }

  /** Candidates being verified or waiting: members we are about to admit, most of them. */
  get size(): number {
    return this.heard.size + this.queued.size;
  }

  /** A candidate our joining learned of: it hears from us once verified (it may not know us yet). */
  announceTo(id: NodeId): void {
    if (this.heard.has(id) || this.queued.has(id)) this.announce.add(id);
  }

  /**
   * The runtime's answer for `id`: the candidate is settled either way, and its slot goes to the
   * oldest queued one. Verified → its incarnation and whether to announce ourselves to it; refused
   * (remembered, bounded) or not a candidate → undefined.
   */
  settle(id: NodeId, ok: boolean, out: SwimEffect[]): { incarnation: number; announce: boolean } | undefined {
    const incarnation = this.heard.get(id);
    if (incarnation === undefined) return undefined;
    this.heard.delete(id);
    this.promote(out);
    const announce = this.announce.delete(id);
    if (!ok) {
      this.stats.refusedMembers++;
      if (this.config.maxRefused > 0) {
        if (this.refused.size >= this.config.maxRefused)
          this.refused.delete(this.refused.values().next().value as NodeId);
        this.refused.add(id);
      }
      return undefined;
    }
    return { incarnation, announce };
  }

  /** Queued candidates into free verification slots (skipping any that joined or were refused meanwhile). */
  private promote(out: SwimEffect[]): void {
    for (const [id, incarnation] of this.queued) {
      if (this.heard.size >= this.config.maxCandidates) break;
      this.queued.delete(id);
      if (this.isMember(id) || this.refused.has(id)) {
        this.announce.delete(id);
        continue;
      }
      this.heard.set(id, incarnation);
      out.push({ type: "verify-member", id });
    }
  }
}
