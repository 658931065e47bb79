/**
 * Policy registry: add a policy by writing its file (the policy, and the zod schema of its settings
 * with their defaults) and one entry here. `createPolicy(name)` with no settings is the shipped
 * behaviour of that policy.
 */
import type { z } from "zod";
import { AffinityPolicy, affinityConfig } from "./affinity.js";
import { affinityArgmax, affinityArgmaxConfig } from "./affinity-argmax.js";
import { CentralizedPolicy, centralizedConfig } from "./centralized.js";
import { CostAwarePolicy, costAwareConfig } from "./cost-aware.js";
import { LeastLoadedPolicy, leastLoadedConfig } from "./least-loaded.js";
import { LocalPolicy, localConfig } from "./local.js";
import type { Policy } from "./policy.js";
import { RandomPolicy, randomConfig } from "./random.js";
import { RoundRobinPolicy, roundRobinConfig } from "./round-robin.js";

export const POLICY_NAMES = [
  "local",
  "affinity",
  "round-robin",
  "random",
  "least-loaded",
  "affinity-argmax",
  "cost-aware",
] as const;

/**
 * Baselines the core can run but the daemon refuses (its settings list only POLICY_NAMES): they
 * need what only the simulator gives — `centralized` is a central router's perfectly fresh global
 * view, which the simulator provides through its oracle.
 */
export const BASELINE_POLICY_NAMES = ["centralized"] as const;
/** Every policy the core (and so the simulator) accepts. */
export const ALL_POLICY_NAMES = [...POLICY_NAMES, ...BASELINE_POLICY_NAMES] as const;
export type PolicyName = (typeof ALL_POLICY_NAMES)[number];
/** A policy the daemon runs. */
export type DeployablePolicyName = (typeof POLICY_NAMES)[number];

const REGISTRY = {
  local: { config: localConfig, create: () => new LocalPolicy() },
  affinity: { config: affinityConfig, create: (c) => new AffinityPolicy(c) },
  "round-robin": { config: roundRobinConfig, create: () => new RoundRobinPolicy() },
  random: { config: randomConfig, create: () => new RandomPolicy() },
  "least-loaded": { config: leastLoadedConfig, create: () => new LeastLoadedPolicy() },
  "affinity-argmax": { config: affinityArgmaxConfig, create: (c) => affinityArgmax(c) },
  "cost-aware": { config: costAwareConfig, create: (c) => new CostAwarePolicy(c) },
  centralized: { config: centralizedConfig, create: (c) => new CentralizedPolicy(c) },
} satisfies { [N in PolicyName]: { config: z.ZodType; create(config: never): Policy } };

/** The settings `createPolicy(name, …)` accepts (every field optional: the defaults fill in). */
export type PolicyConfigInput<N extends PolicyName> = z.input<(typeof REGISTRY)[N]["config"]>;

/** The schema of a policy's settings (e.g. to validate them where they are configured). */
export function policyConfigSchema(name: PolicyName): z.ZodType {
  return REGISTRY[name].config;
}

/** A policy with its settings (defaults for any left out); throws an Error listing bad settings. */
export function createPolicy<N extends PolicyName>(name: N, config?: PolicyConfigInput<N>): Policy {
  const entry = REGISTRY[name] as { config: z.ZodType; create(config: unknown): Policy };
  const r = entry.config.safeParse(config ?? {});
  if (!r.success) {
    const msg = r.error.issues.map((i) => `${i.path.join(".") || "config"}: ${i.message}`).join("; ");
    throw new Error(`invalid ${name} policy config: ${msg}`);
  }
  return entry.create(r.data);
}

export function isPolicyName(s: string): s is PolicyName {
  return (ALL_POLICY_NAMES as readonly string[]).includes(s);
}

export type { Candidate, Policy, PolicyNeeds, RoutingContext } from "./policy.js";
