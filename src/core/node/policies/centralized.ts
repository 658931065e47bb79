/**
 * `centralized` — a BASELINE, SIMULATION ONLY (the daemon refuses it): what one central router with a
 * perfectly fresh global view would do, applying SGLang model gateway's `cache_aware` rule with its
 * CLI defaults (sgl-router: `--balance-abs-threshold 64`, `--balance-rel-threshold 1.5`,
 * `--cache-threshold 0.3`):
 *
 *   1. load imbalanced — (max − min) > balanceAbs AND max > balanceRel × min — → the shortest queue;
 *   2. else, if the best prefix match covers more than cacheThreshold of the prompt → that node;
 *   3. else → the node with the smallest tree (SGLang: "most available cache capacity").
 *
 * The simulator gives it the global view by running it with the oracle (src/sim/oracle.ts): every
 * estimate is the owner's true tree and every queue depth the true one, refreshed the instant they
 * change, free. Differences from SGLang, all in the baseline's favour or neutral:
 *  - SGLang's tree is per CHARACTER and approximate (what the router sent where, LRU-trimmed); here it
 *    is per TOKEN and exact up to the estimates' block granularity (the owner's real cache, evictions
 *    included).
 *  - SGLang's load is the router's count of requests in flight per worker; here it is the node's true
 *    queue depth (waiting + running) plus the forwards this origin sent since that depth was reported.
 *  - There is no router hop: a request enters a node and that node applies the rule on the global
 *    view (one Δcomm to the chosen node when it is another, as from a router co-located with clients).
 * Ties go to self, then to the lowest candidate index (deterministic).
 */
import { z } from "zod";
import { type Candidate, PEERS_ONLY, type Policy, type RoutingContext, rankBy } from "./policy.js";

export const centralizedConfig = z
  .object({
    /** Imbalanced only if the most and least loaded differ by more than this many requests. */
    balanceAbsThreshold: z.number().min(0).max(1_000_000).default(64),
    /** … and the most loaded has more than this times the least loaded's load. */
    balanceRelThreshold: z.number().min(1).max(1_000_000).default(1.5),
    /** Route to the best match only when it covers more than this share of the prompt. */
    cacheThreshold: z.number().min(0).max(1).default(0.3),
  })
  .strict();
export type CentralizedConfig = z.output<typeof centralizedConfig>;

/** The load the rule compares: the reported depth plus our forwards not yet reflected in it. */
function load(c: Candidate): number {
  return c.queueDepth + (c.self ? 0 : (c.sentSinceQueue ?? 0));
}

export class CentralizedPolicy implements Policy {
  readonly name = "centralized";
  readonly needs = PEERS_ONLY;
  private readonly config: CentralizedConfig;

  constructor(config: z.input<typeof centralizedConfig> = {}) {
    this.config = centralizedConfig.parse(config);
  }

  rank(candidates: readonly Candidate[], ctx: RoutingContext): number[] {
    const { balanceAbsThreshold: abs, balanceRelThreshold: rel, cacheThreshold } = this.config;
    let max = Number.NEGATIVE_INFINITY;
    let min = Number.POSITIVE_INFINITY;
    for (const c of candidates) {
      const l = load(c);
      if (l > max) max = l;
      if (l < min) min = l;
    }
    const byLoad = (a: Candidate, b: Candidate, i: number, j: number): number =>
      load(a) - load(b) || (a.self === b.self ? 0 : a.self ? -1 : 1) || i - j;
    if (max - min > abs && max > rel * min) return rankBy(candidates, byLoad);
    let best = 0;
    for (let i = 1; i < candidates.length; i++) {
      const c = candidates[i] as Candidate;
      const b = candidates[best] as Candidate;
      if (c.estimatedMatch > b.estimatedMatch || (c.estimatedMatch === b.estimatedMatch && c.self && !b.self))
        best = i;
    }
    const bestMatch = (candidates[best] as Candidate).estimatedMatch;
    const ratio = ctx.promptTokens === 0 ? 0 : bestMatch / ctx.promptTokens;
    if (ratio > cacheThreshold) {
      // The best match first; the rest (fallbacks) least loaded first.
      const rest = rankBy(candidates, byLoad).filter((i) => i !== best);
      return [best, ...rest];
    }
    return rankBy(
      candidates,
      (a, b, i, j) =>
        (a.treeTokens ?? 0) - (b.treeTokens ?? 0) || (a.self === b.self ? 0 : a.self ? -1 : 1) || i - j,
    );
  }
}
