/** Policy registry: add a policy by writing its file and one line here. */
import { AffinityPolicy } from "./affinity.js";
import { AffinityArgmaxPolicy } from "./affinity-argmax.js";
import { CostAwarePolicy } from "./cost-aware.js";
import { LeastLoadedPolicy } from "./least-loaded.js";
import { LocalPolicy } from "./local.js";
import type { Policy } from "./policy.js";
import { RandomPolicy } from "./random.js";
import { RoundRobinPolicy } from "./round-robin.js";

export const POLICY_NAMES = [
  "local",
  "affinity",
  "round-robin",
  "random",
  "least-loaded",
  "affinity-argmax",
  "cost-aware",
] as const;
export type PolicyName = (typeof POLICY_NAMES)[number];

export function createPolicy(name: PolicyName): Policy {
  switch (name) {
    case "local":
      return new LocalPolicy();
    case "affinity":
      return new AffinityPolicy();
    case "round-robin":
      return new RoundRobinPolicy();
    case "random":
      return new RandomPolicy();
    case "least-loaded":
      return new LeastLoadedPolicy();
    case "affinity-argmax":
      return new AffinityArgmaxPolicy();
    case "cost-aware":
      return new CostAwarePolicy();
  }
}

export function isPolicyName(s: string): s is PolicyName {
  return (POLICY_NAMES as readonly string[]).includes(s);
}

export type { Candidate, Policy, RoutingContext } from "./policy.js";
