/**
 * `cost-aware`: rank by EXPECTED LATENCY instead of match length (beyond the paper). Forwarding pays
 * only when the prefill a peer saves exceeds what reaching it costs (§5's break-even, made a rule):
 *
 *   latency(c) = RTT(c)                            0 for self; measured per peer, else the prior
 *              + wait(c)                           expected wait behind c's queue
 *              + fixedMs + msPerToken × (prompt − match(c))     prefill of the uncached part
 *
 * with every cost learned by the node from its own engine results (cost-model.ts) and peer matches
 * block-granular (the estimates' resolution). A peer's queue depth is as old as its last header, so
 * wait = max(0, (depth + forwards we sent it since) × serviceMs − age of the depth): the reported
 * queue has been draining since (an undiscounted depth of 1 from a heartbeat sent mid-run kept
 * closed-loop requests off the peer holding their prompt). Self wins ties, so with no measurable
 * gain a request never leaves. Fallback order: ascending cost, up to self. The ranking cost adds two
 * measured corrections (`rankingCostMs`): load only repels, and uncached work is charged for the
 * queue it delays. Near-equal peers are ordered at random (see `rank`).
 *
 * Rent or buy. Ranking one request at a time is myopic: once one peer holds a popular prefix, every
 * other origin would forward to it forever, paying an RTT per request (slower than never routing at
 * long RTTs: BENCHMARKS.md, "Routing policies"). Serving locally once instead costs the prefill the peer
 * would have saved, and every later request for that prefix here then hits without the RTT. So when
 * the best candidate is a peer whose advantage is its cache, the origin serves locally if
 *   cost(self) − cost(peer) ≤ expectedReuse × RTT(peer)
 * where expectedReuse (demand.ts) is learned from this origin's own arrivals, counting only the
 * arrivals a bought prefix is expected to survive in our cache until. Under eviction pressure the
 * RTT a reuse saves is net of the hole the duplicate keeps in the cluster's caches while it lives
 * (displacement.ts): rent where renting is cheaper than the misses the hole causes.
 */
import { z } from "zod";
import { BLOCK_SIZE } from "../../block-hash.js";
import type { LearnedCosts } from "../cost-model.js";
import { MAX_SPEED_RATIO, runTimeRatio } from "../engine-costs.js";
import { displacementMs } from "./displacement.js";
import {
  type Candidate,
  type Policy,
  type PolicyNeeds,
  type RoutingContext,
  rankBy,
  selfIndex,
} from "./policy.js";

export const costAwareConfig = z
  .object({
    /**
     * Peers whose cost is within this many blocks' prefill of the best peer are tied, and one is
     * picked at random: estimates resolve matches to whole blocks only, so a smaller gap is RTT
     * noise (0: only float noise ties).
     */
    tieBlocks: z.number().min(0).max(1_000_000).default(1),
    /** Rent or buy: serve a prefix expected to come back often here once, instead of renting it. */
    rentOrBuy: z.boolean().default(true),
    /**
     * Heterogeneous machines: scale a peer's prefill and queue wait by how much slower or faster
     * than ours its engine is, as its answers to our forwards showed it (`speedFactor`). Off: every
     * peer is assumed to cost what we do.
     */
    peerSpeed: z.boolean().default(false),
    /**
     * Caches smaller than the working set: charge uncached tokens for what they evict
     * (`ctx.evictionPressure`), and count a buy's reuse only over the arrivals the prefix survives
     * to (`ctx.survivingReuse`), net of the hole a bought duplicate keeps in the cluster's caches
     * (displacement.ts). Off: reuse discounted by the pressure alone, no eviction charge, no hole.
     * Either way a cache that never evicts routes the same.
     */
    evictionAware: z.boolean().default(true),
  })
  .strict();
export type CostAwareConfig = z.output<typeof costAwareConfig>;

/** Answers from a peer needed before its speed is believed. */
const SPEED_SAMPLES = 3;
/**
 * Advertised speeds within this factor of ours count as ours: equal machines fit slightly different
 * costs from different request mixes, and a 5% "speed" must not pull load onto one of them.
 */
export const SPEED_DEADBAND = 1.15;

/** A speed ratio, read as 1 within the deadband: equal machines fit slightly different costs. */
export function speedOutsideDeadband(r: number): number {
  return r < SPEED_DEADBAND && 1 / r < SPEED_DEADBAND ? 1 : r;
}

/**
 * How many times our cost a peer's engine takes: its observed mean prefill against what our own
 * fit predicts for its mean uncached tokens (1 for self, unknown peers, or with `peerSpeed` off).
 */
export function speedFactor(c: Candidate, k: LearnedCosts, on: boolean, promptTokens = 0): number {
  if (c.self) return 1;
  const adv = advertisedFactor(c, k, promptTokens);
  if (adv !== undefined) return adv;
  const o = c.observedPrefill;
  if (!on || c.self || o === undefined || o.samples < SPEED_SAMPLES) return 1;
  const ours = k.prefillFixedMs + k.prefillMsPerToken * o.uncached;
  if (!(ours > 0) || !(o.prefillMs > 0)) return 1;
  return Math.min(MAX_SPEED_RATIO, Math.max(1 / MAX_SPEED_RATIO, o.prefillMs / ours));
}

/**
 * A peer's advertised costs against ours (both from the same model, engine-costs.ts), for this
 * request's prompt as that peer would run it: undefined unless both are known. Used whether or not
 * `peerSpeed` is on: only nodes running with `advertiseCosts` have them.
 */
function advertisedFactor(c: Candidate, k: LearnedCosts, promptTokens: number): number | undefined {
  const cached = Math.min(promptTokens, c.estimatedMatch);
  const r = runTimeRatio(c.advertisedCosts, k.engine, Math.max(0, promptTokens - cached), cached);
  if (r === undefined) return undefined;
  return speedOutsideDeadband(r);
}

/** Expected end-to-end latency (ms, decode excluded: it is the same wherever the request runs). */
function expectedLatencyMs(c: Candidate, ctx: RoutingContext, f: number): number {
  const k = ctx.costs;
  const rtt = c.self ? 0 : (c.rttMs ?? k.rttPriorMs);
  const uncached = Math.max(0, ctx.promptTokens - c.estimatedMatch);
  const service = serviceMs(k, ctx);
  const wait = c.self ? (c.waitMs ?? c.queueDepth * service) : peerWaitMs(c, service * f);
  // Same float order as without peer speed when f = 1: near-ties must break as they always did.
  if (f === 1) return rtt + wait + k.prefillFixedMs + k.prefillMsPerToken * uncached;
  return rtt + wait + f * (k.prefillFixedMs + k.prefillMsPerToken * uncached);
}

/**
 * The ranking cost: `expectedLatencyMs` with two corrections, each measured (BENCHMARKS.md,
 * "Routing policies").
 *  - A peer's wait never counts as shorter than our own. Load then only ever keeps requests away
 *    from busy peers, never pulls them towards idle ones: every origin sees the same stale "idle"
 *    peer, and moving load on that view herds them onto it, until forwards queue past their timeout
 *    and run twice. Balancing is push-back's job (§3.2). With `ctx.waitFloorJobs` (the node's
 *    `offload`) the rule is bounded (`waitFloorMs`), and a peer's prefill is charged for its queue.
 *  - Under load, uncached prefill also delays everyone queued after it: each uncached token costs
 *    msPerToken × (1 + L), with L our own queue depth standing in for the cluster's load (the only
 *    exact one we have). Per-request latency alone under-values cache hits once queues form.
 *    Closed loop: L = 0, no effect.
 *  - Under eviction pressure P (our cache full, every new token displacing another), each uncached
 *    token also evicts a cached one, whose next request must prefill it again: it costs msPerToken
 *    × (1 + L + P). With room to spare (P = 0) nothing changes; with caches smaller than the working
 *    set, serving a prefix a peer already holds duplicates it at the price of another prefix's only
 *    copy, which the per-request latency alone does not see.
 */
function rankingCostMs(
  c: Candidate,
  selfQueue: number,
  ctx: RoutingContext,
  f: number,
  pressure: number,
): number {
  const k = ctx.costs;
  const service = serviceMs(k, ctx);
  const bound = ctx.waitFloorJobs;
  // Bounded: the queue a peer's uncached prefill delays is the peer's own, not ours.
  const load = bound === undefined || c.self ? selfQueue : Math.min(selfQueue, queuedAt(c));
  const displaced = load + pressure;
  const externality = f * k.prefillMsPerToken * Math.max(0, ctx.promptTokens - c.estimatedMatch) * displaced;
  const base = expectedLatencyMs(c, ctx, f) + externality;
  if (c.self) return base;
  const wait = peerWaitMs(c, service * f);
  return base + Math.max(0, waitFloorMs(selfQueue * service, wait, service * f, bound) - wait);
}

/**
 * What a peer's wait counts as at least: ours (`selfWaitMs`) — or, with a bound, at most `bound`
 * of the peer's own service times above its estimate. Unbounded, a node whose queue is long
 * because it is slow (or stuck behind a long run) ranks every idle peer as busy as itself; the
 * bound keeps the herding guard (others' forwards we cannot see yet) at the size of their share.
 */
export function waitFloorMs(
  selfWaitMs: number,
  peerWaitMs: number,
  peerServiceMs: number,
  bound?: number,
): number {
  if (bound === undefined) return selfWaitMs;
  return Math.min(selfWaitMs, peerWaitMs + bound * peerServiceMs);
}

/** A peer's queue as we count it: its reported depth and our forwards since. */
function queuedAt(c: Candidate): number {
  return c.queueDepth + (c.sentSinceQueue ?? 0);
}

function serviceMs(k: LearnedCosts, ctx: RoutingContext): number {
  return k.serviceMs > 0 ? k.serviceMs : k.prefillFixedMs + k.prefillMsPerToken * ctx.promptTokens;
}

/** A reported depth drains while it ages; our forwards since then add to it. */
function peerWaitMs(c: Candidate, service: number): number {
  return Math.max(0, queuedAt(c) * service - (c.queueAgeMs ?? 0));
}

export class CostAwarePolicy implements Policy {
  readonly name = "cost-aware";
  readonly needs: Readonly<PolicyNeeds>;
  private readonly config: CostAwareConfig;

  constructor(config: z.input<typeof costAwareConfig> = {}) {
    this.config = costAwareConfig.parse(config);
    // Rent-or-buy is what reads the prefix demand.
    this.needs = Object.freeze({ peers: true, demand: this.config.rentOrBuy });
  }

  rank(candidates: readonly Candidate[], ctx: RoutingContext): number[] {
    const k = ctx.costs;
    const selfQueue = (candidates[selfIndex(candidates)] as Candidate).queueDepth;
    const aware = this.config.evictionAware;
    const pressure = aware ? (ctx.evictionPressure ?? 0) : 0;
    const cost = candidates.map((c) =>
      rankingCostMs(c, selfQueue, ctx, speedFactor(c, k, this.config.peerSpeed, ctx.promptTokens), pressure),
    );
    const tieBreak = candidates.map((c) => (c.self ? -1 : ctx.random()));
    const order = rankBy(candidates, (_ca, _cb, a, b) => {
      const d = (cost[a] as number) - (cost[b] as number);
      // Sub-microsecond differences are float noise, not a reason to forward.
      if (Math.abs(d) > 1e-6) return d;
      return (tieBreak[a] as number) - (tieBreak[b] as number);
    });
    // Peers within `tieBlocks` blocks' prefill of the best peer are tied: always taking the lowest
    // measured RTT would pile every request onto one of several equal replicas (BENCHMARKS.md,
    // "Routing policies").
    const tol = Math.max(1e-6, k.prefillMsPerToken * BLOCK_SIZE * this.config.tieBlocks);
    const first = order[0] as number;
    if (!(candidates[first] as Candidate).self) {
      let n = 1;
      while (n < order.length) {
        const i = order[n] as number;
        if ((candidates[i] as Candidate).self || (cost[i] as number) > (cost[first] as number) + tol) break;
        n++;
      }
      const tied = order.slice(0, n).sort((a, b) => (tieBreak[a] as number) - (tieBreak[b] as number));
      for (let j = 0; j < n; j++) order[j] = tied[j] as number;
    }
    const best = candidates[order[0] as number] as Candidate;
    const reuse = aware ? (ctx.survivingReuse ?? ctx.expectedReuse) : ctx.expectedReuse;
    if (this.config.rentOrBuy && !best.self && reuse !== undefined && reuse > 0) {
      const s = selfIndex(candidates);
      const self = candidates[s] as Candidate;
      if (best.estimatedMatch > self.estimatedMatch) {
        const loss = (cost[s] as number) - (cost[order[0] as number] as number);
        const rtt = best.rttMs ?? k.rttPriorMs;
        // Under eviction pressure a duplicate also keeps another prefix out of every cache while it
        // lives (displacement.ts); `evictionAware` off: the paper grid's rule, unchanged.
        const bought = best.estimatedMatch - self.estimatedMatch;
        const victim = ctx.prefixTokens ?? bought;
        const hole = aware
          ? displacementMs(pressure, candidates.length, k.prefillMsPerToken, bought, victim, rtt)
          : 0;
        if (loss <= reuse * (rtt - hole)) return [s];
      }
    }
    return order;
  }
}
