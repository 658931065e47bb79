/**
 * Client deadlines (beyond the paper). A client may say how long it will wait for its answer
 * (`EngineRequest.deadlineMs`, ms from its arrival at the entry node; the API's
 * `x-prefixmesh-deadline-ms`). Then:
 *  - routing ranks only the peers whose expected completion fits what is left (`withinDeadline`);
 *  - admission refuses at once, with when to retry, a request that cannot finish in time here and
 *    that no peer is expected to start in time either (admission.ts `waitsTooLong`, node.ts);
 *  - every forward carries what is left of it, less the round trip, as its `deadlineMs`: the serving
 *    node refuses a forward it cannot start in time and drops it at dequeue once expired. Relative
 *    on the wire (each node turns it into its own clock's deadline): peers' clocks are not synced.
 *
 * Expected completion = RTT + the queue's wait + prefill of the uncached part + `maxTokens` of decode,
 * scaled by the peer's advertised speed when known: an upper estimate of the answer's arrival, so a
 * request routed by it fits unless the estimates are wrong.
 */
import type { EngineRequest } from "../engine.js";
import type { LearnedCosts } from "./cost-model.js";
import { speedFactor } from "./policies/cost-aware.js";
import type { Candidate } from "./policies/policy.js";

/** Longest deadline a client may give, ms (also the wire's bound). */
export const MAX_DEADLINE_MS = 3_600_000;

/** The client's deadline on our clock, if it gave a sane one (∞ otherwise). */
export function deadlineAt(request: EngineRequest, receivedAt: number): number {
  const d = request.deadlineMs;
  return typeof d === "number" && Number.isFinite(d) && d > 0 && d <= MAX_DEADLINE_MS
    ? receivedAt + d
    : Number.POSITIVE_INFINITY;
}

/** When candidate `c` is expected to have answered `request`, ms from now. */
export function expectedCompletionMs(
  c: Candidate,
  request: EngineRequest,
  k: LearnedCosts,
  decodeMsPerToken: number,
): number {
  const tokens = request.tokens.length;
  const f = speedFactor(c, k, false, tokens);
  const rtt = c.self ? 0 : (c.rttMs ?? k.rttPriorMs);
  const wait = c.self
    ? (c.waitMs ?? c.queueDepth * k.serviceMs)
    : Math.max(0, (c.queueDepth + (c.sentSinceQueue ?? 0)) * k.serviceMs - (c.queueAgeMs ?? 0));
  const prefill = k.prefillFixedMs + k.prefillMsPerToken * Math.max(0, tokens - c.estimatedMatch);
  const perToken = c.advertisedCosts?.msPerOutput ?? k.engine?.msPerOutput ?? decodeMsPerToken;
  return rtt + f * (wait + prefill) + Math.max(0, request.maxTokens) * perToken;
}

/** Self, and the peers expected to answer within `leftMs` (self always stays: admission judges it). */
export function withinDeadline(
  candidates: Candidate[],
  request: EngineRequest,
  k: LearnedCosts,
  decodeMsPerToken: number,
  leftMs: number,
): Candidate[] {
  if (!Number.isFinite(leftMs)) return candidates;
  return candidates.filter((c) => c.self || expectedCompletionMs(c, request, k, decodeMsPerToken) <= leftMs);
}
