/**
 * `affinity-argmax`: Algorithm 1's line 5 taken literally — argmax of the estimated match over the
 * nodes in id order, the FIRST maximum winning (as numpy's argmax), self included at its own
 * position, so ties (including "nobody holds anything") go to the lowest id rather than to self.
 * Not the default: kept to study how much of the paper's hotspot share that tie rule explains. It is
 * `affinity` with `ties: "id"`, under its own name.
 */
import { z } from "zod";
import { AffinityPolicy } from "./affinity.js";

/** No settings: the tie rule is what makes this policy. */
export const affinityArgmaxConfig = z.object({}).strict();

export function affinityArgmax(config: z.input<typeof affinityArgmaxConfig> = {}): AffinityPolicy {
  affinityArgmaxConfig.parse(config);
  return new AffinityPolicy({ ties: "id" }, "affinity-argmax");
}
