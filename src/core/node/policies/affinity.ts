/**
 * `affinity`: the paper's Algorithm 1 — argmax of the estimated prefix match, ties to self.
 * Among peers tied for the best match the choice is random, so a shared prefix held by several peers
 * does not always land on the same one. Fallback order: descending match.
 */
import type { Candidate, Policy, RoutingContext } from "./policy.js";

export class AffinityPolicy implements Policy {
  readonly name = "affinity";
  rank(candidates: readonly Candidate[], ctx: RoutingContext): number[] {
    const order = candidates.map((_, i) => i);
    const tieBreak = candidates.map((c) => (c.self ? -1 : ctx.random()));
    order.sort((a, b) => {
      const ca = candidates[a] as Candidate;
      const cb = candidates[b] as Candidate;
      if (cb.estimatedMatch !== ca.estimatedMatch) return cb.estimatedMatch - ca.estimatedMatch;
      return (tieBreak[a] as number) - (tieBreak[b] as number);
    });
    return order;
  }
}
