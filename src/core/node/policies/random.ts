/** `random`: a uniformly random eligible node (self included), then the rest in random order. */
import { z } from "zod";
import { type Candidate, PEERS_ONLY, type Policy, type RoutingContext } from "./policy.js";

export const randomConfig = z.object({}).strict();

export class RandomPolicy implements Policy {
  readonly name = "random";
  readonly needs = PEERS_ONLY;
  rank(candidates: readonly Candidate[], ctx: RoutingContext): number[] {
    const order = candidates.map((_, i) => i);
    for (let i = order.length - 1; i > 0; i--) {
      const j = Math.floor(ctx.random() * (i + 1));
      const t = order[i] as number;
      order[i] = order[j] as number;
      order[j] = t;
    }
    return order;
  }
}
