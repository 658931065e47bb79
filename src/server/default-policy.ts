/**
 * The routing policy `prefixmesh node`, `cluster` and `sim` use unless `--policy` says otherwise.
 * `cost-aware`, not the paper's `affinity`: in simulation it is never meaningfully slower than serving
 * locally, while affinity loses once the network delay reaches the paper's own break-even; on a real
 * llama.cpp cluster it beat both local and affinity on mean latency and hotspot share (BENCHMARKS.md,
 * "Routing policies" and "Node daemon"). `affinity` stays available by name; the paper experiments
 * name it explicitly, and the core node config keeps it as its default.
 */
import { DAEMON_NODE_DEFAULTS } from "../core/node/config.js";
import type { DeployablePolicyName } from "../core/node/policies/index.js";

export const DEFAULT_POLICY: DeployablePolicyName = DAEMON_NODE_DEFAULTS.policy;
