/**
 * Planner: the origin's routing decision for one request — the policy's order over the candidates
 * becomes the plan of peers to try, with our own estimate of when each planned peer should answer
 * (used for the answer deadline under peer trust). Owned by the origin (origin.ts holds the
 * instance; no other role calls it). It keeps what routing learns across requests: the policy, the
 * prefix demand (rent-or-buy) and the smoothed decode time per token.
 */
import type { EngineRequest, EngineResult } from "../engine.js";
import { invariant } from "../invariant.js";
import { keyTokens, namespaceTokens } from "../namespace.js";
import type { NodeConfig } from "./config.js";
import { expectedRunMs, type LearnedCosts } from "./cost-model.js";
import { deadlineAt, withinDeadline } from "./deadline.js";
import { type Eviction, PrefixDemand } from "./demand.js";
import { servesModel } from "./models.js";
import { OFFLOAD_WAIT_FLOOR_JOBS } from "./offload.js";
import {
  type Candidate,
  createPolicy,
  type Policy,
  type PolicyConfigInput,
  type PolicyName,
} from "./policies/index.js";
import { planFromOrder } from "./routing.js";
import type { NodeDeps, NodeId } from "./types.js";

/** Prefix keys whose demand an origin tracks (LRU beyond). */
const DEMAND_KEYS = 4096;

/** A request's route: the peers to try, best first, and the first choice. */
export interface Plan {
  /** Peers to try, best first (the policy's order up to self). */
  plan: NodeId[];
  /** Our own estimate of each planned peer's answer time (ms from its forward), parallel to `plan`. */
  expect: number[];
  target: NodeId;
  predicted: number;
}

export class Planner {
  private policy: Policy;
  /** Smoothed decode time per generated token, over every answer we got (our answer-time estimate). */
  private decodeMsPerToken = 0;
  /** Arrivals per prefix at this origin (rent-or-buy); bounded; kept across restarts. */
  private readonly demand: PrefixDemand;

  constructor(
    private readonly config: NodeConfig,
    private readonly deps: NodeDeps,
    private readonly paranoid: boolean,
  ) {
    this.policy = createPolicy(config.policy, config.policyConfig);
    this.demand = new PrefixDemand(DEMAND_KEYS, config.demandPrior);
  }

  /** Without settings: the configured ones if they are for this policy, else its defaults. */
  setPolicy(name: PolicyName, config?: PolicyConfigInput<PolicyName>): void {
    const configured = name === this.config.policy ? this.config.policyConfig : undefined;
    this.policy = createPolicy(name, config ?? configured);
  }

  get policyName(): string {
    return this.policy.name;
  }

  /** The policy ranks peers (false: it never forwards, so no candidates need building). */
  get needsPeers(): boolean {
    return this.policy.needs.peers;
  }

  /**
   * The policy's order over `candidates` (self first; undefined when the policy never forwards) as
   * a plan; with peer trust (which holds peers to it), our answer-time estimate of each planned peer.
   */
  route(
    request: EngineRequest,
    now: number,
    selfMatch: number,
    candidates: Candidate[] | undefined,
    costs: LearnedCosts,
    eviction: Eviction,
  ): Plan {
    const plan: NodeId[] = [];
    const expect: number[] = [];
    let target = this.config.id;
    let predicted = selfMatch;
    // A client deadline: only peers expected to answer in time are ranked (deadline.ts).
    if (candidates !== undefined && request.deadlineMs !== undefined)
      candidates = withinDeadline(
        candidates,
        request,
        costs,
        this.decodeMsPerToken,
        deadlineAt(request, now) - now,
      );
    if (candidates !== undefined) {
      const reuse = this.policy.needs.demand
        ? this.demand.arrive(keyTokens(request), candidates, eviction, namespaceTokens(request))
        : undefined;
      const order =
        candidates.length === 1
          ? [0]
          : this.policy.rank(candidates, {
              promptTokens: request.tokens.length,
              now,
              random: this.deps.random,
              costs,
              expectedReuse: reuse?.flat,
              ...(reuse === undefined
                ? {}
                : { survivingReuse: reuse.surviving, prefixTokens: reuse.prefixTokens }),
              ...(this.config.offload ? { waitFloorJobs: OFFLOAD_WAIT_FLOOR_JOBS } : {}),
              ...(eviction.pressure > 0 ? { evictionPressure: eviction.pressure } : {}),
            });
      if (this.paranoid) checkOrder(order, candidates);
      // A node that does not serve the request's model only routes it: every ranked peer is in its plan.
      const routeOnly = !servesModel(this.config.models, request.model);
      planFromOrder(order, candidates, plan, routeOnly);
      const planned = (i: number): Candidate | undefined =>
        routeOnly ? candidates.find((c) => c.id === plan[i]) : candidates[order[i] as number];
      if (this.config.peerTrust || this.config.answerRecovery) {
        for (let i = 0; i < plan.length; i++)
          expect.push(this.expectedAnswerMs(planned(i) as Candidate, request, costs));
      }
      const first = routeOnly ? planned(0) : candidates[order[0] ?? 0];
      if (first) {
        target = first.id;
        predicted = first.estimatedMatch;
      }
    }
    return { plan, expect, target, predicted };
  }

  /** One answer's decode time per generated token, smoothed (ignored when it reports none). */
  learnDecode(r: EngineResult): void {
    if (!(r.completionTokens > 0) || !(r.decodeMs >= 0) || !Number.isFinite(r.decodeMs)) return;
    const v = r.decodeMs / r.completionTokens;
    this.decodeMsPerToken += (v - this.decodeMsPerToken) / 8;
  }

  /**
   * When a peer should answer a forward of `request`, from our side alone (the daemon's acks carry
   * no ETA): its queue and what we sent it since, at our learned service time, then the request's
   * own prefill and its whole `maxTokens` budget of decode, and the round trip. An upper estimate.
   * Unlike cost-aware's `peerWaitMs`, it does not drain the queue by the report's age, on purpose: the
   * forwards other origins sent the peer since that report are unseen here, so a deadline should err
   * late, and draining it measured worse (BENCHMARKS.md, "Answer deadlines drained by a report's age").
   */
  private expectedAnswerMs(c: Candidate, request: EngineRequest, costs: LearnedCosts): number {
    const queued = c.queueDepth + (c.sentSinceQueue ?? 0);
    const uncached = request.tokens.length - c.estimatedMatch;
    const run = Math.max(
      costs.serviceMs,
      expectedRunMs(costs, uncached, request.maxTokens, this.decodeMsPerToken),
    );
    return queued * costs.serviceMs + run + (c.rttMs ?? costs.rttPriorMs);
  }
}

/** The policy contract (O(candidates), checked runs only): a permutation of indexes holding self. */
function checkOrder(order: readonly number[], candidates: readonly Candidate[]): void {
  const seen = new Set(order);
  const valid = order.every((i) => Number.isInteger(i) && i >= 0 && i < candidates.length);
  invariant(valid && seen.size === order.length, "the policy's order is no permutation of candidates");
  invariant(seen.has(candidates.findIndex((c) => c.self)), "the policy's order lacks self");
}
