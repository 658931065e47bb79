/**
 * Claims of a member's new life that its check took down to its own word (admissions.ts): the
 * highest per member, and when it was last checked. Taken down, a claim stays in circulation (others
 * hold it while they check it) and each copy would look like a new life again: a fresh check, the
 * claim held and spread anew, by every member in turn, so one forged record circulated without end.
 * So the member is checked at most once per `afterMs` (config `recheckAfterChangeMs`) once a claim of
 * it was taken down: a record at or below that claim is then re-checked without being held or spread
 * (a genuine later life there is still found), one above it is checked as ever. A hello read from
 * another process than the claim's (a duplicate id, a stale address) is bounded the same way.
 */
import type { NodeId } from "./types.js";

/** `check`: a new life, held and spread while checked; `recheck`: checked only; `ignore`: old news. */
export type Disowning = "check" | "recheck" | "ignore";

export class Disowned {
  /** id → the highest claim taken down and when the member was last checked since; oldest first. */
  private readonly claims = new Map<NodeId, { above: number; at: number }>();

  constructor(
    private readonly afterMs: number,
    private readonly max: number,
  ) {}

  /** A new life of `id` at `incarnation` told at `now`: what to do with it (a check counts as one). */
  verdict(id: NodeId, incarnation: number, now: number): Disowning {
    const d = this.claims.get(id);
    if (d === undefined) return "check";
    if (now - d.at < this.afterMs) return "ignore";
    d.at = now;
    return incarnation > d.above ? "check" : "recheck";
  }

  /** `claim` of `id` taken down at `now`: records up to it are old news, checked only now and then. */
  disown(id: NodeId, claim: number, now: number): void {
    const above = Math.max(claim, this.claims.get(id)?.above ?? claim);
    // Re-inserted, so the least recently disowned go first once the map is full (bounded by members).
    this.claims.delete(id);
    this.claims.set(id, { above, at: now });
    if (this.claims.size > this.max) this.claims.delete(this.claims.keys().next().value as NodeId);
  }

  /** `id`'s own word confirmed `claim`: at or above every claim taken down, nothing is left to hold. */
  vouched(id: NodeId, claim: number): void {
    const d = this.claims.get(id);
    if (d !== undefined && claim >= d.above) this.claims.delete(id);
  }

  /** The highest claim of `id` taken down, if any (tests, views). */
  above(id: NodeId): number | undefined {
    return this.claims.get(id)?.above;
  }
}
