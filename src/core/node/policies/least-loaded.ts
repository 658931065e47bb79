/**
 * `least-loaded`: the node with the smallest known queue depth; ties to self, then to the longest
 * estimated match (so it is cache-aware among equally loaded nodes).
 */
import { z } from "zod";
import { type Candidate, PEERS_ONLY, type Policy, rankBy } from "./policy.js";

export const leastLoadedConfig = z.object({}).strict();

export class LeastLoadedPolicy implements Policy {
  readonly name = "least-loaded";
  readonly needs = PEERS_ONLY;
  rank(candidates: readonly Candidate[]): number[] {
    return rankBy(candidates, (ca, cb, a, b) => {
      if (ca.queueDepth !== cb.queueDepth) return ca.queueDepth - cb.queueDepth;
      if (ca.self !== cb.self) return ca.self ? -1 : 1;
      if (ca.estimatedMatch !== cb.estimatedMatch) return cb.estimatedMatch - ca.estimatedMatch;
      return a - b;
    });
  }
}
