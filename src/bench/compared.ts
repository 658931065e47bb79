/**
 * The policies `prefixmesh bench --compare-policies` runs: the baseline first, then the paper's policy,
 * then the default (the cluster is left on the default). A module of its own, so the command's help
 * does not load the bench. Every name must be one the nodes accept (POLICY_NAMES).
 */
import { DEFAULT_POLICY } from "../server/default-policy.js";

export const COMPARED = ["local", "affinity", DEFAULT_POLICY] as const;
