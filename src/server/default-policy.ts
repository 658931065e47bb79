/**
 * The routing policy `prefixmesh node`, `cluster` and `sim` use unless `--policy` says otherwise.
 * `cost-aware`, not the paper's `affinity`: in simulation it is never meaningfully slower than serving
 * locally (worst +0.9%), while affinity loses from Δcomm 200 ms on (the paper's own break-even); on a
 * real 4-node llama.cpp cluster it had 0.71× local's mean latency against affinity's 0.82×, hotspot
 * 33% against 59% (BENCHMARKS.md, "Routing policies" and "Node daemon"). `affinity` stays available
 * by name; the paper experiments name it explicitly, and the core node config keeps it as its default.
 */
import { DAEMON_NODE_DEFAULTS } from "../core/node/config.js";
import type { PolicyName } from "../core/node/policies/index.js";

export const DEFAULT_POLICY: PolicyName = DAEMON_NODE_DEFAULTS.policy;
