/**
 * `cost-aware`: rank by EXPECTED LATENCY instead of match length (beyond the paper). Forwarding pays
 * only when the prefill a peer saves exceeds what reaching it costs (§5's break-even, made a rule):
 *
 *   latency(c) = RTT(c)                              0 for self; measured per peer, else the prior
 *              + wait(c)                              expected wait behind c's queue
 *              + fixedMs + msPerToken × (prompt − match(c))   prefill of the uncached part
 *
 * with every cost learned by the node from its own engine results (cost-model.ts) and peer matches
 * block-granular (the estimates' resolution). A peer's queue depth is as old as its last header:
 * wait = max(0, (depth + forwards we sent it since) × serviceMs − age of the depth), i.e. the
 * reported queue has been draining since (measured: an undiscounted depth of 1 from a heartbeat
 * sent mid-run kept closed-loop requests off the peer holding their prompt). Self wins ties, so with no measurable gain a request
 * never leaves; tied peers are ordered at random so a prefix held by several does not pile onto
 * one. Fallback order: ascending expected latency, up to self.
 *
 * Rent or buy. Ranking one request at a time is myopic: once one peer holds a popular prefix, every
 * other origin would forward to it forever, paying an RTT per request (measured on MMLU at Δcomm
 * 200 ms: 0.369 s against local's 0.323 s). Serving locally once instead costs the prefill the peer
 * would have saved, and every later request for that prefix here then hits without the RTT. So when
 * the best candidate is a peer whose advantage is its cache, the origin serves locally if
 *   latency(self) − latency(peer) ≤ expectedReuse × RTT(peer)
 * where expectedReuse (demand.ts) is learned from this origin's own arrivals.
 */
import { BLOCK_SIZE } from "../../block-hash.js";
import type { LearnedCosts } from "../cost-model.js";
import { type Candidate, type Policy, type RoutingContext, selfIndex } from "./policy.js";

/** Used only when no node supplies learned costs (e.g. a policy driven outside PrefixNode). */
const FALLBACK_COSTS: LearnedCosts = {
  prefillFixedMs: 50,
  prefillMsPerToken: 0.5,
  serviceMs: 0,
  rttPriorMs: 250,
  samples: 0,
};

/** Expected end-to-end latency (ms, decode excluded: it is the same wherever the request runs). */
export function expectedLatencyMs(c: Candidate, ctx: RoutingContext): number {
  const k = ctx.costs ?? FALLBACK_COSTS;
  const rtt = c.self ? 0 : (c.rttMs ?? k.rttPriorMs);
  const uncached = Math.max(0, ctx.promptTokens - c.estimatedMatch);
  const service = k.serviceMs > 0 ? k.serviceMs : k.prefillFixedMs + k.prefillMsPerToken * ctx.promptTokens;
  const wait = c.self
    ? c.queueDepth * service
    : Math.max(0, (c.queueDepth + (c.sentSinceQueue ?? 0)) * service - (c.queueAgeMs ?? 0));
  return rtt + wait + k.prefillFixedMs + k.prefillMsPerToken * uncached;
}

/**
 * The ranking cost: as `expectedLatencyMs`, except that a peer's wait never counts as shorter than
 * our own. Load then only ever keeps requests away from busy peers, never pulls them towards idle
 * ones: every origin sees the same stale "idle" peer, and moving load on that view herds them onto
 * it (measured: MMLU skewed, open loop 10 req/s, mean 219 s against affinity's 4.8 s, as forwards
 * queued past their timeout and ran twice). Balancing is push-back's job (§3.2).
 */
function rankingCostMs(c: Candidate, selfWaitMs: number, ctx: RoutingContext): number {
  const base = expectedLatencyMs(c, ctx);
  if (c.self) return base;
  const k = ctx.costs ?? FALLBACK_COSTS;
  const service = k.serviceMs > 0 ? k.serviceMs : k.prefillFixedMs + k.prefillMsPerToken * ctx.promptTokens;
  const wait = Math.max(0, (c.queueDepth + (c.sentSinceQueue ?? 0)) * service - (c.queueAgeMs ?? 0));
  return base + Math.max(0, selfWaitMs - wait);
}

export class CostAwarePolicy implements Policy {
  readonly name = "cost-aware";
  readonly usesDemand = true;
  rank(candidates: readonly Candidate[], ctx: RoutingContext): number[] {
    const self0 = candidates[selfIndex(candidates)] as Candidate;
    const k = ctx.costs ?? FALLBACK_COSTS;
    const service = k.serviceMs > 0 ? k.serviceMs : k.prefillFixedMs + k.prefillMsPerToken * ctx.promptTokens;
    const selfWait = self0.queueDepth * service;
    const cost = candidates.map((c) => rankingCostMs(c, selfWait, ctx));
    const tieBreak = candidates.map((c) => (c.self ? -1 : ctx.random()));
    const order = candidates.map((_, i) => i);
    order.sort((a, b) => {
      const d = (cost[a] as number) - (cost[b] as number);
      // Sub-microsecond differences are float noise, not a reason to forward.
      if (Math.abs(d) > 1e-6) return d;
      return (tieBreak[a] as number) - (tieBreak[b] as number);
    });
    // Peers whose cost is within one block's prefill of the best peer are tied: estimates resolve
    // matches to blocks only, so a smaller gap is RTT noise, and always taking the lowest measured
    // RTT piles every request onto one of several equal replicas (measured in open loop: MMLU
    // skewed, 8 req/s, mean 0.96 s against 0.91 s with the tie spread at random).
    const tol = Math.max(1e-6, k.prefillMsPerToken * BLOCK_SIZE);
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
    const reuse = ctx.expectedReuse;
    if (!best.self && reuse !== undefined && reuse > 0) {
      const s = selfIndex(candidates);
      const self = candidates[s] as Candidate;
      if (best.estimatedMatch > self.estimatedMatch) {
        const loss = (cost[s] as number) - (cost[order[0] as number] as number);
        const rtt = best.rttMs ?? (ctx.costs ?? FALLBACK_COSTS).rttPriorMs;
        if (loss <= reuse * rtt) return [s];
      }
    }
    return order;
  }
}
