/**
 * Offload (config `offload`): a request of our own client still waiting in our queue moves to a
 * peer expected to finish it sooner — by more than one service time, so two nodes never trade a
 * request back and forth on a small difference. node.ts asks at each anti-entropy tick, for the
 * first few waiting requests, and moves them (executor: out of the queue; origin: a new plan).
 *
 * Both sides are estimates from local state only: our start time elapsed-aware (executor.ts
 * `waitFrom`: a job far past the usual service time, e.g. an unbounded generation, is expected to
 * run as long again), a peer's from its reported queue (drained while the report aged, plus what
 * we sent it since), its RTT and the prefill its estimated match leaves.
 */
import type { EngineRequest } from "../engine.js";
import type { LearnedCosts } from "./cost-model.js";
import type { Candidate } from "./policies/policy.js";
import type { NodeId } from "./types.js";

/** Waiting requests looked at per tick (each costs one candidate walk). */
export const OFFLOAD_SCAN = 8;

/** A waiting request of ours, with when it would start here (ms from now). */
export interface Waiting {
  reqId: string;
  request: EngineRequest;
  startsInMs: number;
}

/** Where a waiting request moves: the peer, and when we expect its answer (ms from the forward). */
export interface Offload {
  to: NodeId;
  expectMs: number;
}

/**
 * The peer to move `w` to, if one is expected to finish it sooner by a service time (and, for
 * admission, to start it within `maxWaitMs`); else undefined.
 */
export function offloadTarget(
  w: Waiting,
  candidates: readonly Candidate[],
  k: LearnedCosts,
  maxWaitMs = Number.POSITIVE_INFINITY,
): Offload | undefined {
  const tokens = w.request.tokens.length;
  const prefill = (match: number) => k.prefillFixedMs + k.prefillMsPerToken * Math.max(0, tokens - match);
  const self = candidates.find((c) => c.self);
  if (self === undefined) return undefined;
  let best: NodeId | undefined;
  let bestMs = w.startsInMs + prefill(self.estimatedMatch) - k.serviceMs;
  for (const c of candidates) {
    if (c.self) continue;
    const queued = Math.max(0, (c.queueDepth + (c.sentSinceQueue ?? 0)) * k.serviceMs - (c.queueAgeMs ?? 0));
    const ms = queued + (c.rttMs ?? k.rttPriorMs) + prefill(c.estimatedMatch);
    if (ms < bestMs && queued <= maxWaitMs) {
      best = c.id;
      bestMs = ms;
    }
  }
  return best === undefined ? undefined : { to: best, expectMs: bestMs };
}
