/**
 * `affinity`: the paper's Algorithm 1 — argmax of the estimated prefix match. Fallback order:
 * descending match. How ties are broken is the policy's one setting (`ties`):
 *  - `self-then-random` (default): self wins a tie; among peers tied for the best match the choice
 *    is random, so a shared prefix held by several peers does not always land on the same one;
 *  - `random`: at random among all tied candidates, self included;
 *  - `id`: the first in id order, self at its own position (`affinity-argmax`, no randomness).
 */
import { z } from "zod";
import { type Candidate, PEERS_ONLY, type Policy, type RoutingContext, rankBy } from "./policy.js";

export const affinityConfig = z
  .object({ ties: z.enum(["self-then-random", "random", "id"]).default("self-then-random") })
  .strict();
export type AffinityConfig = z.output<typeof affinityConfig>;

export class AffinityPolicy implements Policy {
  readonly needs = PEERS_ONLY;
  private readonly config: AffinityConfig;

  constructor(
    config: z.input<typeof affinityConfig> = {},
    readonly name: string = "affinity",
  ) {
    this.config = affinityConfig.parse(config);
  }

  rank(candidates: readonly Candidate[], ctx: RoutingContext): number[] {
    const ties = this.config.ties;
    if (ties === "id") {
      return rankBy(candidates, (ca, cb) => {
        if (cb.estimatedMatch !== ca.estimatedMatch) return cb.estimatedMatch - ca.estimatedMatch;
        return ca.id < cb.id ? -1 : ca.id > cb.id ? 1 : 0;
      });
    }
    const tieBreak = candidates.map((c) => (c.self && ties === "self-then-random" ? -1 : ctx.random()));
    return rankBy(candidates, (ca, cb, a, b) => {
      if (cb.estimatedMatch !== ca.estimatedMatch) return cb.estimatedMatch - ca.estimatedMatch;
      return (tieBreak[a] as number) - (tieBreak[b] as number);
    });
  }
}
