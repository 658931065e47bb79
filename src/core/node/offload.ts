/**
 * Offload (config `offload`): a request of our own client still waiting in our queue moves to a
 * peer expected to finish it sooner — by more than one service time, so two nodes never trade a
 * request back and forth on a small difference. node.ts asks at each anti-entropy tick, for the
 * last few waiting requests (they wait longest; moving them changes no other's start here), and
 * moves them (executor: out of the queue; origin: a new plan).
 *
 * Both sides are estimates from local state only: our start time elapsed-aware (executor.ts
 * `waitFrom`: a job far past the usual service time, e.g. an unbounded generation, is expected to
 * run as long again), a peer's from its reported queue (drained while the report aged, plus what
 * we sent it since), its RTT and the prefill its estimated match leaves — each of its jobs and its
 * prefill scaled by its speed against ours (cost-aware's `speedFactor`: advertised costs).
 *
 * Herding: every origin sees the same report of an idle-looking peer, and each would move work to
 * it in the same tick. So one round (`OffloadRound`, one tick) charges each request it moves to its
 * peer's expected wait at once — its expected run there, times the nodes that could be moving work
 * to that peer in the same round (every candidate but the peer: the worst case, each doing what we
 * do) — so our share of a peer's spare time is what we take, never all of it.
 */
import type { EngineRequest } from "../engine.js";
import { invariant } from "../invariant.js";
import type { LearnedCosts } from "./cost-model.js";
import { speedFactor } from "./policies/cost-aware.js";
import type { Candidate } from "./policies/policy.js";
import type { NodeId } from "./types.js";

/**
 * With offload, cost-aware's "a peer's wait never counts shorter than ours" is bounded to this many
 * of the peer's service times above its estimate (policies/cost-aware.ts `waitFloorMs`): the work
 * other origins may have sent it that we cannot see yet, not our whole queue.
 */
export const OFFLOAD_WAIT_FLOOR_JOBS = 1;

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
 * One offload round (a tick, or one admission spill): what it has moved to each peer, as expected
 * ms of work there (already multiplied by the herd allowance). A new round starts from nothing:
 * by then the peers' reports and acks count what was moved.
 */
export class OffloadRound {
  private readonly movedMs = new Map<NodeId, number>();

  /** Expected ms of work this round put on `id` (herd allowance included). */
  charged(id: NodeId): number {
    return this.movedMs.get(id) ?? 0;
  }

  /** `ms` of work moved to `id`, counted `herd` times over. */
  charge(id: NodeId, ms: number, herd: number): void {
    invariant(ms >= 0 && herd >= 1, "an offload charge is a non-negative run, counted at least once");
    this.movedMs.set(id, this.charged(id) + ms * herd);
  }
}

/**
 * The peer to move `w` to, if one is expected to finish it sooner by a service time (and, for
 * admission, to start it within `maxWaitMs`); else undefined. With `round`, the choice is charged
 * to the peer (see `OffloadRound`), and what the round already moved there counts in its wait.
 */
export function offloadTarget(
  w: Waiting,
  candidates: readonly Candidate[],
  k: LearnedCosts,
  maxWaitMs = Number.POSITIVE_INFINITY,
  round?: OffloadRound,
): Offload | undefined {
  const tokens = w.request.tokens.length;
  const prefill = (match: number) => k.prefillFixedMs + k.prefillMsPerToken * Math.max(0, tokens - match);
  const self = candidates.find((c) => c.self);
  if (self === undefined) return undefined;
  let best: Candidate | undefined;
  let bestRunMs = 0;
  let bestMs = w.startsInMs + prefill(self.estimatedMatch) - k.serviceMs;
  for (const c of candidates) {
    if (c.self) continue;
    const f = speedFactor(c, k, false, tokens);
    const reported = (c.queueDepth + (c.sentSinceQueue ?? 0)) * k.serviceMs * f - (c.queueAgeMs ?? 0);
    const queued = Math.max(0, reported) + (round?.charged(c.id) ?? 0);
    const runMs = f * prefill(c.estimatedMatch);
    const ms = queued + (c.rttMs ?? k.rttPriorMs) + runMs;
    if (ms < bestMs && queued <= maxWaitMs) {
      best = c;
      bestMs = ms;
      bestRunMs = Math.max(runMs, k.serviceMs * f);
    }
  }
  if (best === undefined) return undefined;
  round?.charge(best.id, bestRunMs, Math.max(1, candidates.length - 1));
  return { to: best.id, expectMs: bestMs };
}
