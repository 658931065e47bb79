/**
 * What news of this node calls for (swim.ts applies it). Only a member raises its own incarnation, so
 * a rise of exactly one is a refutation, taken without a check (admissions.ts `newLife`); a record
 * this process could not have made is another life's (a process before a restart, or forged) and
 * outbid by two, so every member sees a rise of two or more and checks this life as a new one.
 *
 * Another life's alive record is outbid at most `MAX_OUTBIDS` times a life. A restart's old life is
 * over: its records are a fixed few, and two outbids end above any two of them heard in either order
 * (the first lands two above one; the second, if the other lay above or just below where it landed,
 * two above that) but one at exactly where the first landed, which reads as our own echo. A live
 * process using our id (a copied config, a partitioned old process) answers each outbid with its
 * own, so without a bound the two would climb without end, every rise a check by every member;
 * past the bound its alive records are only counted (`duplicateId`), for the operator. Its
 * suspicions and deaths of us are still answered, as ever, or we would be put out.
 */
import { MAX_INCARNATION } from "./codec.js";
import type { MemberUpdate, SwimStats } from "./types.js";

/**
 * `ignore`: our own record or an echo of it (or a rival life's, counted); `resay`: an older suspicion
 * of us (our refutation ran out of retransmits before reaching its sender); `raise`: our incarnation
 * to `to`.
 */
export type SelfNews = { kind: "ignore" } | { kind: "resay" } | { kind: "raise"; to: number };

/** Another life's alive records a life outbids: enough for an old life's records at two incarnations. */
export const MAX_OUTBIDS = 2;

export class SelfLives {
  /** Where the run of incarnations we say now began (refutations step by one): boot, or our last outbid. */
  private floor: number;
  private outbids = 0;

  constructor(
    boot: number,
    private readonly stats: Pick<SwimStats, "duplicateId">,
  ) {
    this.floor = boot;
  }

  /**
   * `u` about us, already bounded by plausibleMax, so a raise stays within what the others believe (their
   * bound leads ours by the refute margin; two past news at the top of ours is believed by members less
   * than the margin less one behind). A record alive at our incarnation is our own echo, or a life
   * booted the same millisecond: the two are indistinguishable, so it is ignored (raising on it would
   * raise on every echo, without end).
   */
  news(u: MemberUpdate, incarnation: number): SelfNews {
    // Above us, any status: nothing we said; its holders must see our life rise by two.
    if (u.incarnation > incarnation) return this.outbid(u, u.incarnation + 2);
    if (u.incarnation === incarnation)
      return u.status === "alive" ? { kind: "ignore" } : { kind: "raise", to: capped(incarnation + 1) };
    // Just below the run we say (below our boot, or in the gap our last outbid left): another life's.
    // Its holders see us rise by two already unless we stand one above it (a clock set back, or an
    // outbid of a lower record of it), when those that took us as a refutation must see two more.
    if (incarnation === this.floor && u.incarnation === this.floor - 1)
      return this.outbid(u, incarnation + 2);
    return u.status === "alive" ? { kind: "ignore" } : { kind: "resay" };
  }

  /**
   * `u` about us from a sender not verified yet: never a suspicion we answer, but a seed answering our
   * join holds our previous life's record (push-pull.ts), which we outbid if we stand just above it.
   */
  stranger(u: MemberUpdate, incarnation: number): SelfNews {
    if (incarnation !== this.floor || u.incarnation !== this.floor - 1) return { kind: "ignore" };
    return this.outbid({ ...u, status: "alive" }, incarnation + 2);
  }

  private outbid(u: MemberUpdate, to: number): SelfNews {
    if (u.status === "alive") {
      if (this.outbids >= MAX_OUTBIDS) {
        this.stats.duplicateId++;
        return { kind: "ignore" };
      }
      this.outbids++;
    }
    this.floor = capped(to);
    return { kind: "raise", to: this.floor };
  }
}

/** News past plausibleMax is refused before it gets here: the cap only keeps a raise a safe integer. */
function capped(to: number): number {
  return Math.min(to, MAX_INCARNATION);
}
