/**
 * The routing policy interface (Algorithm 1, line 5 generalised). A policy sees, for every node that
 * may take the request (self always included; suspected, departed and pushed-back peers already
 * removed), everything the node knows locally, and returns them in order of preference. The node
 * tries that order: forward to the first peer, on timeout/error the next, and stops at itself.
 * Policies are pure apart from their own small state (e.g. a round-robin cursor) and `ctx.random`.
 */
import type { EngineCosts } from "../../snapshot.js";
import type { LearnedCosts } from "../cost-model.js";
import type { NodeId } from "../types.js";

export interface Candidate {
  id: NodeId;
  self: boolean;
  /** Estimated prefix match in tokens (exact for self). */
  estimatedMatch: number;
  /** Age of the estimate in ms (0 for self). */
  estimateAgeMs: number;
  /** Last known queue depth (waiting + running). */
  queueDepth: number;
  /** Age of that queue depth in ms (0 for self; undefined if never reported). */
  queueAgeMs?: number;
  /** Requests this node forwarded to it since it reported that depth (0 for self). */
  sentSinceQueue?: number;
  /** Smoothed measured RTT in ms (undefined until measured; 0 for self). */
  rttMs: number | undefined;
  /** Known KV capacity in tokens (0 if unknown). */
  capacityTokens: number;
  /** Tokens in its tree as last reported (exact for self; undefined if never reported). */
  treeTokens?: number;
  /** Its prefill as its answers to our forwards showed it (peers we forwarded to only). */
  observedPrefill?: Readonly<{ prefillMs: number; uncached: number; samples: number }>;
  /** Its engine costs as its snapshot header advertised them (`advertiseCosts`, engine-costs.ts). */
  advertisedCosts?: Readonly<EngineCosts>;
  /**
   * Self only, with `offload`: the expected wait here, from how long the running jobs have run (a
   * job far past the usual service time is expected to run as long again); policies that weigh
   * waits use it instead of queueDepth × the service time. Undefined: the count alone.
   */
  waitMs?: number;
}

export interface RoutingContext {
  promptTokens: number;
  now: number;
  /** Uniform in [0,1): injected, so routing replays exactly. */
  random(): number;
  /** The node's learned costs (prefill fit, service time, RTT prior). */
  costs: LearnedCosts;
  /**
   * Requests expected to arrive HERE later that reuse the longest prefix any candidate holds
   * (demand.ts); set for policies that declare `needs.demand`, undefined when nothing matches.
   */
  expectedReuse?: number;
  /**
   * The hits here a prefix bought now is expected to give before our cache evicts it (demand.ts);
   * `expectedReuse` discounts by the eviction pressure alone. Undefined: `expectedReuse`.
   */
  survivingReuse?: number;
  /**
   * The typical length (tokens) of the prefixes arriving here (demand.ts): what a buy's evictions
   * are counted in (displacement.ts). Undefined: the bought prefix's own length.
   */
  prefixTokens?: number;
  /**
   * Cost-aware: a peer's wait counts at least our own, but at most this many of its service times
   * above its own estimate (the node's `offload`); undefined: at least our own, unbounded.
   */
  waitFloorJobs?: number;
  /**
   * Share of what our cache takes in that evicts something else lately (executor/run-cache.ts), in [0, 1]:
   * standing in for the cluster's, as our queue does for its load. Undefined: 0.
   */
  evictionPressure?: number;
}

/** What a policy needs the node to gather for it; the node does exactly that and no more. */
export interface PolicyNeeds {
  /** A candidate per routable peer (false: the policy never forwards, so no index walk). */
  peers: boolean;
  /** `ctx.expectedReuse` (the origin then tracks prefix demand). */
  demand: boolean;
}

export interface Policy {
  readonly name: string;
  readonly needs: Readonly<PolicyNeeds>;
  /**
   * Returns candidate indexes, best first. Must contain the self candidate; entries after self are
   * ignored (self always succeeds).
   */
  rank(candidates: readonly Candidate[], ctx: RoutingContext): number[];
}

/** What most policies need: every routable peer, no demand tracking. */
export const PEERS_ONLY: Readonly<PolicyNeeds> = Object.freeze({ peers: true, demand: false });

/** Candidate indexes ordered by `cmp` over (candidate, index) pairs: the shape of most rankings. */
export function rankBy(
  candidates: readonly Candidate[],
  cmp: (a: Candidate, b: Candidate, i: number, j: number) => number,
): number[] {
  const order = candidates.map((_, i) => i);
  return order.sort((i, j) => cmp(candidates[i] as Candidate, candidates[j] as Candidate, i, j));
}

/** Index of the self candidate (always present). */
export function selfIndex(candidates: readonly Candidate[]): number {
  for (let i = 0; i < candidates.length; i++) if (candidates[i]?.self) return i;
  throw new Error("routing candidates must include self");
}
