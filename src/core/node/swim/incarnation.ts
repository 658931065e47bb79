/** Which incarnations a member starts at and which are believable (swim.ts applies them). */
import { invariant } from "../../invariant.js";
import { MAX_INCARNATION } from "./codec.js";
import type { SwimConfig } from "./config.js";

/**
 * A node's first incarnation: its boot time in whole ms of the injected clock (the daemon's is wall
 * clock, the simulator's starts at 0). Milliseconds, not seconds: a supervisor restarting a crashed
 * node within the same second must still outrank its previous life. Refutations add 1 each, far
 * fewer than the ms a life lasts. A clock stepped back across a restart only loses the head start:
 * a peer holding the old life suspect or dead says so and is refuted, as before.
 *
 * A clock far off at boot (past `incarnationSkewMs`) is a broken node, as auth already treats one (a
 * shared secret refuses its timestamps; certificates may not be valid yet or any more), and it stays
 * so for its life (the daemon's clock is read once at boot). Far ahead: its incarnation is implausible
 * to the others, who refuse its news of itself (`implausibleIncarnations`), so once suspected it
 * cannot refute until it restarts with a right clock. Far behind (epoch 0): the others' incarnations
 * are implausible to it, so it refuses their news while they accept its. Either way it is the broken
 * node that loses, never a healthy member pinned.
 */
export function bootIncarnation(nowMs: number): number {
  const inc = Math.min(MAX_INCARNATION, Math.max(0, Math.floor(nowMs)));
  invariant(Number.isSafeInteger(inc), "boot incarnation must be a safe integer");
  return inc;
}

/**
 * The highest incarnation believable at `now` (`self`: in news of this node). A member's is its boot
 * time plus its refutations, so news far past our clock is forged (a suspicion at the ceiling no one
 * could outbid) or from a broken clock: others' may lead our clock by the skew allowed plus the
 * refutations. News of us is believed (and outbid) up to that bound less the refute margin, so our
 * answer (one more; two past a record not of this life, self-news.ts) is believed by every member
 * whose clock is less than the margin (less one) behind ours, and a forged suspicion at the top of
 * their bound holds us out until our clock has gained the margin
 * (clocks alike; see config.ts `incarnationRefuteMarginMs` for ours ahead by more).
 */
export function plausibleMax(config: SwimConfig, self: boolean, now: number): number {
  const others = Math.floor(now) + config.incarnationRefutations + config.incarnationSkewMs;
  return self ? others - config.incarnationRefuteMarginMs : others;
}
