/**
 * `affinity-argmax`: Algorithm 1's line 5 taken literally — argmax of the estimated match over the
 * nodes in id order, the FIRST maximum winning (as numpy's argmax), self included at its own
 * position, so ties (including "nobody holds anything") go to the lowest id rather than to self.
 * Not the default: kept to study how much of the paper's hotspot share that tie rule explains.
 */
import { type Candidate, type Policy, rankBy } from "./policy.js";

export class AffinityArgmaxPolicy implements Policy {
  readonly name = "affinity-argmax";
  rank(candidates: readonly Candidate[]): number[] {
    return rankBy(candidates, (ca, cb) => {
      if (cb.estimatedMatch !== ca.estimatedMatch) return cb.estimatedMatch - ca.estimatedMatch;
      return ca.id < cb.id ? -1 : ca.id > cb.id ? 1 : 0;
    });
  }
}
