/**
 * SWIM's candidates (owned by one Swim, swim.ts): ids heard of from anyone, not yet verified by this
 * node, and dead or left members heard alive again. Only a yes to our own `verify-member` lets one
 * join, so an unverified peer can name ids but never put them in the member table; everything here
 * is bounded, since any peer can name as many ids as it likes.
 *
 * At most `maxCandidates` verifications are in flight; further ids wait in a FIFO queue (at most
 * `maxQueuedCandidates`) and are verified as earlier ones settle. Dropping them instead lost most of
 * a joiner's member list (and most of the joiners a seed hears of at a cluster's start), which then
 * trickled in by gossip and periodic push-pulls over tens of seconds.
 *
 * A refused id is remembered (at most `maxRefused`, ../../refusals.ts) and not verified again until
 * its backoff (`recheckFirstMs` doubling to `recheckMaxMs`) runs out, or sooner when news names it
 * under a higher incarnation than the one it was refused under: a member that refuted a suspicion
 * is running again, or a restarted one (its first incarnation is its boot time); such news heard
 * within the floor is kept for its next mention (refusals.ts). Either way it is only named again, so
 * it is asked through `verify-member` like any candidate: a re-check is a fresh check, never a
 * relay's word.
 */
import { Refusals, type RefusedView, refusedView } from "../../refusals.js";
import type { SwimConfig } from "./config.js";
import type { NodeId, SwimEffect, SwimStats } from "./types.js";

/** Most characters of a refusal's reason kept (it comes from the runtime, shown on `/cluster`). */
const MAX_REASON_CHARS = 200;

export class Candidates {
  /** Being verified: id → highest incarnation heard. */
  private readonly heard = new Map<NodeId, number>();
  /** Waiting for a verification slot, oldest first: id → highest incarnation heard. */
  private readonly queued = new Map<NodeId, number>();
  /** Candidates named by a member list we asked for (joining): told we are alive once verified. */
  private readonly announce = new Set<NodeId>();
  private readonly refused: Refusals<NodeId>;
  /** Ids ever made candidates: a rise across a message says it named someone new to us. */
  named = 0;

  constructor(
    private readonly selfId: NodeId,
    private readonly config: SwimConfig,
    private readonly isMember: (id: NodeId) => boolean,
    private readonly stats: SwimStats,
  ) {
    this.refused = new Refusals(
      {
        firstMs: config.recheckFirstMs,
        maxMs: config.recheckMaxMs,
        afterChangeMs: config.recheckAfterChangeMs,
      },
      config.maxRefused,
    );
  }

  /**
   * Makes `id` a candidate (verified now, or queued for a slot); false if refused (and not due for a
   * re-check at `now`) or no room.
   */
  name(id: NodeId, incarnation: number, now: number, out: SwimEffect[]): boolean {
    if (id === this.selfId || this.isMember(id)) return false;
    for (const m of [this.heard, this.queued]) {
      const cur = m.get(id);
      if (cur === undefined) continue;
      if (incarnation > cur) m.set(id, incarnation);
      return true;
    }
    // Still refused (it stays so until the check settles): due for a re-check, or not named at all.
    const recheck = this.refused.has(id);
    if (recheck && !this.refused.mayCheck(id, now, incarnation)) return false;
    // A re-check is of the newest life told of it, though the ping asking for it carries none: at 0, a
    // dead member's yes fell below its tombstone (admissions.ts) and it needed another check.
    if (recheck) incarnation = Math.max(incarnation, this.refused.get(id)?.heard ?? incarnation);
    this.named++;
    if (this.heard.size < this.config.maxCandidates) {
      this.heard.set(id, incarnation);
      out.push({ type: "verify-member", id });
    } else if (this.queued.size < this.config.maxQueuedCandidates) this.queued.set(id, incarnation);
    else {
      // Counted as a drop, not a re-check: its refusal stands and the next mention asks again.
      this.stats.candidatesDropped++;
      if (recheck) this.stats.rechecksDropped++;
      return false;
    }
    if (recheck) this.stats.rechecks++;
    return true;
  }

  /** Whether `id` is a candidate (being verified or waiting to be). */
  has(id: NodeId): boolean {
    return this.heard.has(id) || this.queued.has(id);
  }

  /**
   * A live member whose new life failed our check (swim/admissions.ts): remembered as a refused
   * candidate is, so only a higher incarnation or its backoff asks again.
   */
  refuse(id: NodeId, incarnation: number, now: number, reason = "refused"): void {
    this.stats.refusedMembers++;
    this.refused.refuse(id, reason.slice(0, MAX_REASON_CHARS), now, incarnation);
  }

  /** Whether `id` failed our last check of it (remembered, until a later one passes). */
  isRefused(id: NodeId): boolean {
    return this.refused.has(id);
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
   * (remembered with its backoff, bounded) or not a candidate → undefined.
   */
  settle(
    id: NodeId,
    ok: boolean,
    now: number,
    out: SwimEffect[],
    reason = "refused",
  ): { incarnation: number; announce: boolean } | undefined {
    const incarnation = this.heard.get(id);
    if (incarnation === undefined) return undefined;
    this.heard.delete(id);
    this.promote(out);
    const announce = this.announce.delete(id);
    if (!ok) {
      this.refuse(id, incarnation, now, reason);
      return undefined;
    }
    this.refused.forget(id);
    return { incarnation, announce };
  }

  /** The refused ids remembered: why, and when each may be asked again (for `/cluster`). */
  refusals(now: number): RefusedView[] {
    return this.refused.entries().map(([id, r]) => refusedView(id, r, now));
  }

  /** Queued candidates into free verification slots (skipping any that joined meanwhile). */
  private promote(out: SwimEffect[]): void {
    for (const [id, incarnation] of this.queued) {
      if (this.heard.size >= this.config.maxCandidates) break;
      this.queued.delete(id);
      if (this.isMember(id)) {
        this.announce.delete(id);
        continue;
      }
      this.heard.set(id, incarnation);
      out.push({ type: "verify-member", id });
    }
  }
}
