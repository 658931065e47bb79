/**
 * `affinity`: the paper's Algorithm 1 — argmax of the estimated prefix match, ties to self.
 * Among peers tied for the best match the choice is random, so a shared prefix held by several peers
 * does not always land on the same one. Fallback order: descending match.
 */
import { type Candidate, type Policy, type RoutingContext, rankBy } from "./policy.js";

export class AffinityPolicy implements Policy {
  readonly name = "affinity";
  rank(candidates: readonly Candidate[], ctx: RoutingContext): number[] {
    const tieBreak = candidates.map((c) => (c.self ? -1 : ctx.random()));
    return rankBy(candidates, (ca, cb, a, b) => {
      if (cb.estimatedMatch !== ca.estimatedMatch) return cb.estimatedMatch - ca.estimatedMatch;
      return (tieBreak[a] as number) - (tieBreak[b] as number);
    });
  }
}
