/**
 * What news of this node calls for (swim.ts applies it). Only a member raises its own incarnation, so
 * a rise of exactly one is a refutation, taken without a check (admissions.ts `newLife`); a record
 * this process could not have made is another life's (a process before a restart, or forged) and
 * outbid by two, so every member sees a rise of two or more and checks this life as a new one.
 */
import { MAX_INCARNATION } from "./codec.js";
import type { MemberUpdate } from "./types.js";

/**
 * `ignore`: our own record or an echo of it; `resay`: an older suspicion of us (our refutation ran out
 * of retransmits before reaching its sender); `raise`: our incarnation to `to`.
 */
export type SelfNews = { kind: "ignore" } | { kind: "resay" } | { kind: "raise"; to: number };

/**
 * `u` about us, already bounded by plausibleMax, so a raise stays within what the others believe (their
 * bound leads ours by the refute margin; two past news at the top of ours is believed by members less
 * than the margin less one behind). `boot`: our first incarnation; none of our records is below it. A
 * record alive at our incarnation is our own echo, or a life booted the same millisecond: the two are
 * indistinguishable, so it is ignored (raising on it would raise on every echo, without end).
 */
export function selfNews(u: MemberUpdate, incarnation: number, boot: number): SelfNews {
  const raise = (to: number): SelfNews => ({ kind: "raise", to: Math.min(to, MAX_INCARNATION) });
  // Above us, any status: nothing we said; its holders must see our life rise by two.
  if (u.incarnation > incarnation) return raise(u.incarnation + 2);
  if (u.incarnation === incarnation)
    return u.status === "alive" ? { kind: "ignore" } : raise(incarnation + 1);
  // Below our boot: a previous life's. Its holders see us rise by two already unless we booted exactly
  // one above it (a clock set back), when those that took our boot as a refutation must see two more.
  if (u.incarnation < boot && incarnation < u.incarnation + 2) return raise(incarnation + 2);
  return u.status === "alive" ? { kind: "ignore" } : { kind: "resay" };
}
