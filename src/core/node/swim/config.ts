/**
 * SWIM + Lifeguard settings. The defaults are HashiCorp memberlist's LAN profile (the anchor the issue
 * names): probe every 1 s with a 500 ms timeout, 3 indirect probes, gossip to 3 members every 200 ms,
 * suspicion 4 × max(1, log10 N) × the probe interval (Lifeguard stretches it up to 6× that until
 * independent confirmations arrive), a local-health multiplier of at most 8, each update piggybacked
 * 4 × ⌈log10(N + 1)⌉ times.
 */
import { z } from "zod";
import { RECHECK_AFTER_CHANGE_MS, RECHECK_FIRST_MS, RECHECK_MAX_MS } from "../../refusals.js";

/**
 * Checks (`verify-member`) the runtime keeps in flight at most: mesh-verify.ts takes its bound from
 * here and answers one past it "busy", which refuses a legitimate member for a backoff.
 */
export const MAX_VERIFICATIONS = 256;
/**
 * `maxCandidates`' ceiling: candidates (candidates.ts) and live members' new lives (admissions.ts) each
 * keep up to `maxCandidates` checks in flight, each until its answer, so both together stay within
 * the runtime's bound (which keeps a check it was asked for until it answers it).
 */
export const MAX_CANDIDATES = MAX_VERIFICATIONS / 2;

const CANDIDATES_BOUND_ERROR =
  `must be at most ${MAX_CANDIDATES}: candidates and live members' new lives each keep up to ` +
  `maxCandidates checks in flight, and a node verifies at most ${MAX_VERIFICATIONS} at once`;

export const swimConfigSchema = z.object({
  probeIntervalMs: z.number().positive().max(600_000).default(1_000),
  probeTimeoutMs: z.number().positive().max(600_000).default(500),
  /** k: members asked to probe a target that missed its direct ack. */
  indirectChecks: z.number().int().min(0).max(16).default(3),
  /** With the indirect probes, ping the target directly once more (memberlist's TCP fallback). */
  fallbackPing: z.boolean().default(true),
  /**
   * Probe periods a member must fail in a row before it is suspected: a failed one is followed by an
   * immediate re-probe of the same member (out of the round-robin). Message loss makes one period fail
   * by chance (direct, k indirect and the fallback all lost); a second independent failure is that
   * chance squared, so live members are not suspected, for one more probe period of detection time.
   */
  probeAttempts: z.number().int().min(1).max(8).default(2),
  gossipIntervalMs: z.number().positive().max(600_000).default(200),
  /** Members each gossip tick sends the pending updates to. */
  gossipFanout: z.number().int().min(1).max(64).default(3),
  /** Suspicion timeout (its floor) = suspicionMult × max(1, log10 N) × probeIntervalMs. */
  suspicionMult: z.number().min(1).max(100).default(4),
  /** Lifeguard: the timeout starts at this × the floor and falls to the floor with confirmations. */
  suspicionMaxTimeoutMult: z.number().min(1).max(100).default(6),
  /** Lifeguard's local-health multiplier runs 0 … awarenessMax − 1; probe interval and timeout × (1 + it). */
  awarenessMax: z.number().int().min(1).max(64).default(8),
  /** Each update is piggybacked retransmitMult × ⌈log10(N + 1)⌉ times. */
  retransmitMult: z.number().int().min(1).max(100).default(4),
  /** Most updates piggybacked on one message (the rest wait: a message stays one datagram). */
  maxPiggyback: z.number().int().min(1).max(256).default(16),
  /** A full push-pull of the member list with one random member this often (0 = never). */
  pushPullIntervalMs: z.number().min(0).max(3_600_000).default(30_000),
  /** Dead or departed members are remembered this long (refused resurrection by old news; reconnects). */
  deadRetainMs: z.number().min(0).max(86_400_000).default(600_000),
  /**
   * Every this many probe periods, one remembered dead member gets a push-pull: after a partition
   * heals, each side learns the other is alive (each refutes its own death) and the cluster rejoins.
   */
  reconnectEveryProbes: z.number().int().min(1).max(10_000).default(5),
  /** Members (alive, suspect or remembered dead) at most: a peer-controlled count. */
  maxMembers: z.number().int().min(1).max(100_000).default(4_096),
  /**
   * Members heard of through a relay and being verified by this node, at most (verifications in flight);
   * as many live members' new lives again. At most MAX_CANDIDATES (the runtime's bound).
   */
  maxCandidates: z.number().int().min(1).max(MAX_CANDIDATES, { error: CANDIDATES_BOUND_ERROR }).default(64),
  /**
   * Candidates waiting for one of those verification slots, at most (beyond it, newly named ids are
   * dropped): a whole member list fits, so a joiner learns every member from one push-pull.
   */
  maxQueuedCandidates: z.number().int().min(0).max(100_000).default(4_096),
  /** Ids refused by verification, remembered (bounded) so a relay cannot make us ask again and again. */
  maxRefused: z.number().int().min(0).max(100_000).default(1_024),
  /** A refused id is verified again after this (../../refusals.ts: a fix takes tens of seconds)… */
  recheckFirstMs: z.number().positive().max(86_400_000).default(RECHECK_FIRST_MS),
  /** …doubling per refusal up to this: one that stays wrong costs one check per this long. */
  recheckMaxMs: z.number().positive().max(86_400_000).default(RECHECK_MAX_MS),
  /**
   * News of it under a higher incarnation re-checks it at once, but at most this often; so is a live
   * member checked again once a check took a claimed life of it down to its own word (swim/disowned.ts).
   */
  recheckAfterChangeMs: z.number().min(0).max(86_400_000).default(RECHECK_AFTER_CHANGE_MS),
  /**
   * Incarnations are boot times (ms) plus one per refutation, so news of one far past our own clock
   * is forged or from a broken clock: refused (incarnation.ts `plausibleMax`). This much clock skew
   * between members is allowed for, far beyond the window a shared secret allows (net/auth/hmac.ts),
   * since mTLS checks no clock that closely.
   */
  incarnationSkewMs: z.number().int().min(0).max(86_400_000).default(600_000),
  /** …plus this many refutations beyond a member's own clock (raised only by suspicions of it). */
  incarnationRefutations: z.number().int().min(1).max(86_400_000).default(3_600_000),
  /**
   * A member refutes news of itself up to the bound others apply (clock + skew + refutations) less
   * this margin, so its refutation is believed by every member whose clock is less than this far behind
   * its own. The gap is what a forged suspicion at the top of the others' bound holds its victim out
   * for (until its clock catches up): a small margin shortens that, a large one covers more skew (a
   * victim ahead by more can be pushed past what the members behind believe, and held out by the rest).
   * At most `incarnationSkewMs` + 1, so a member keeps `incarnationRefutations` of room to refute.
   */
  incarnationRefuteMarginMs: z.number().int().min(1).max(86_400_000).default(60_000),
  /** Most entries accepted in one message (updates or a push-pull list): bigger messages are refused. */
  maxEntriesPerMessage: z.number().int().min(1).max(100_000).default(8_192),
});

export type SwimConfig = z.output<typeof swimConfigSchema>;
export type SwimConfigInput = z.input<typeof swimConfigSchema>;

export function resolveSwimConfig(input: SwimConfigInput = {}): SwimConfig {
  const r = swimConfigSchema.safeParse(input);
  if (!r.success) {
    const msg = r.error.issues.map((i) => `${i.path.join(".") || "config"}: ${i.message}`).join("; ");
    throw new Error(`invalid swim config: ${msg}`);
  }
  if (r.data.recheckMaxMs < r.data.recheckFirstMs)
    throw new Error("invalid swim config: recheckMaxMs must not be below recheckFirstMs");
  if (r.data.probeTimeoutMs > r.data.probeIntervalMs)
    throw new Error("invalid swim config: probeTimeoutMs must not exceed probeIntervalMs");
  // A member refutes news of itself up to clock + refutations + skew − margin: a margin past the skew
  // (+1, as refuting adds one) eats into the refutations it was promised, and past both it could not
  // refute even its boot incarnation.
  if (r.data.incarnationRefuteMarginMs > r.data.incarnationSkewMs + 1)
    throw new Error("invalid swim config: incarnationRefuteMarginMs must not exceed incarnationSkewMs + 1");
  return r.data;
}

/** The suspicion timeout's floor for a cluster of `n` members (memberlist's suspicionTimeout). */
export function suspicionMinMs(c: SwimConfig, n: number): number {
  return c.suspicionMult * Math.max(1, Math.log10(Math.max(n, 1))) * c.probeIntervalMs;
}

/** Times each update is piggybacked in a cluster of `n` (memberlist's retransmitLimit). */
export function retransmitLimit(c: SwimConfig, n: number): number {
  return c.retransmitMult * Math.ceil(Math.log10(n + 1));
}

/** memberlist's pushPullScale: the push-pull interval grows with log2 N beyond 32 members. */
export function pushPullScale(n: number): number {
  return n <= 32 ? 1 : Math.ceil(Math.log2(n) - Math.log2(32)) + 1;
}
