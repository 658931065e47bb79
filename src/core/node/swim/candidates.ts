/**
 * SWIM's candidates (owned by one Swim, swim.ts): ids heard of from anyone, not yet verified by this
 * node. Only a yes to our own `verify-member` lets one join, so an unverified peer can name ids but
 * never put them in the member table; the candidates and the refused ids are bounded, since any peer
 * can name as many ids as it likes.
 */
import type { SwimConfig } from "./config.js";
import type { NodeId, SwimEffect, SwimStats } from "./types.js";

export class Candidates {
  /** id → highest incarnation heard. */
  private readonly heard = new Map<NodeId, number>();
  /** Candidates named by a member list we asked for (joining): told we are alive once verified. */
  private readonly announce = new Set<NodeId>();
  private readonly refused = new Set<NodeId>();

  constructor(
    private readonly selfId: NodeId,
    private readonly config: SwimConfig,
    private readonly isMember: (id: NodeId) => boolean,
    private readonly stats: SwimStats,
  ) {}

  /** Makes `id` a candidate and asks the runtime to verify it; false if refused or no room. */
  name(id: NodeId, incarnation: number, out: SwimEffect[]): boolean {
    if (id === this.selfId || this.isMember(id) || this.refused.has(id)) return false;
    const cur = this.heard.get(id);
    if (cur !== undefined) {
      if (incarnation > cur) this.heard.set(id, incarnation);
      return true;
    }
    if (this.heard.size >= this.config.maxCandidates) {
      this.stats.candidatesDropped++;
      return false;
    }
    this.heard.set(id, incarnation);
    out.push({ type: "verify-member", id });
    return true;
  }

  /** A candidate our joining learned of: it hears from us once verified (it may not know us yet). */
  announceTo(id: NodeId): void {
    if (this.heard.has(id)) this.announce.add(id);
  }

  /**
   * The runtime's answer for `id`: the candidate is settled either way. Verified → its incarnation
   * and whether to announce ourselves to it; refused (remembered, bounded) or not a candidate →
   * undefined.
   */
  settle(id: NodeId, ok: boolean): { incarnation: number; announce: boolean } | undefined {
    const incarnation = this.heard.get(id);
    if (incarnation === undefined) return undefined;
    this.heard.delete(id);
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
}
