/** `prefixmesh sim`'s flags: checked and bounded into the simulator's config and the workload choice. */
import { z } from "zod";
import { nodeConfigSchema } from "../core/node/config.js";
import { ALL_POLICY_NAMES } from "../core/node/policies/index.js";
import { isProfileName, PROFILE_NAMES } from "../engines/sim/profiles.js";
import { type NodeConfigNumberKey, nodeConfigNumber } from "../server/settings/index.js";
import { simGossip } from "../sim/setup.js";
import type { SimConfig } from "../sim/types.js";
import { droppedKeys } from "./dropped-keys.js";
import { CliError, parseNumber } from "./errors.js";
import { parseFlag } from "./flags.js";
import { parseFaultFlags, type SimFaultOptions } from "./sim-faults.js";
import {
  DEFAULT_MMLU_DIR,
  parseWorkloadChoice,
  type WorkloadChoice,
  type WorkloadFlagValues,
} from "./workload-flags.js";

export interface SimOptions extends WorkloadFlagValues, SimFaultOptions {
  nodes: string;
  policy: string;
  commMs: string;
  jitterMs: string;
  pollMs: string;
  workload: string;
  mmluDir?: string;
  requests?: string;
  seed: string;
  json?: string;
  profile: string;
  capacityTokens?: string;
  concurrency?: string;
  daemonConfig?: boolean;
  nodeConfig?: string;
  deadlineMs?: string;
  forwardTimeoutMs?: string;
  forwardAckTimeoutMs?: string;
  forwardResends?: string;
  oracle?: boolean;
  rate?: string;
  gossip?: string;
  maxEstimates?: string;
}

/** Checks every flag; returns the simulator config and the workload choice, or throws CliError. */
export function parseSimOptions(o: SimOptions): {
  config: SimConfig;
  workload: WorkloadChoice;
  mmluDir: string;
  requests: number | undefined;
  rate: number | undefined;
} {
  // The simulator also runs the baselines the daemon refuses (the centralized router).
  const policy = parseFlag(z.enum(ALL_POLICY_NAMES), "policy", o.policy);
  const workload = parseWorkloadChoice(o.workload, o, { openLoop: o.rate !== undefined });
  if (!isProfileName(o.profile))
    throw new CliError(`--profile must be one of ${PROFILE_NAMES.join(", ")}, got '${o.profile}'`);
  const config: SimConfig = {
    nodes: parseNumber("--nodes", o.nodes, { min: 1, max: 1024, integer: true }),
    policy,
    commMs: parseNumber("--comm-ms", o.commMs, { min: 0, max: 3_600_000 }),
    jitterMs: parseNumber("--jitter-ms", o.jitterMs, { min: 0, max: 3_600_000 }),
    pollMs: parseNumber("--poll-ms", o.pollMs, { min: 1, max: 3_600_000 }),
    profile: o.profile,
    seed: parseNumber("--seed", o.seed, { min: 0, max: 2 ** 32 - 1, integer: true }),
    keepRecords: o.json !== undefined,
  };
  if (o.oracle === true) config.oracle = true;
  if (o.gossip !== undefined) {
    if (o.gossip !== "full" && o.gossip !== "scuttlebutt")
      throw new CliError(`--gossip must be full or scuttlebutt, got '${o.gossip}'`);
    config.gossip = o.gossip;
  }
  if (o.maxEstimates !== undefined) {
    config.maxEstimates = parseNumber("--max-estimates", o.maxEstimates, {
      min: 1,
      max: 4095,
      integer: true,
    });
  }
  if ((config.oracle || config.policy === "centralized") && config.gossip === "scuttlebutt")
    throw new CliError(
      "--oracle and --policy centralized run with --gossip full only (the oracle pushes full-mesh snapshots)",
    );
  if (o.capacityTokens !== undefined) {
    config.capacityTokens = parseNumber("--capacity-tokens", o.capacityTokens, {
      min: 1,
      max: 1e12,
      integer: true,
    });
  }
  config.node = {};
  // Bounded by the node's own config schema: the bounds are stated once, in src/core/node/config.ts.
  if (o.concurrency !== undefined) config.node.concurrency = nodeSetting("concurrency", o.concurrency);
  if (o.forwardTimeoutMs !== undefined)
    config.node.forwardTimeoutMs = nodeSetting("forwardTimeoutMs", o.forwardTimeoutMs);
  if (o.forwardAckTimeoutMs !== undefined)
    config.node.forwardAckTimeoutMs = nodeSetting("forwardAckTimeoutMs", o.forwardAckTimeoutMs);
  if (o.forwardResends !== undefined)
    config.node.forwardResends = nodeSetting("forwardResends", o.forwardResends);
  if (o.daemonConfig === true) config.daemonConfig = true;
  if (o.deadlineMs !== undefined)
    config.deadlineMs = parseNumber("--deadline-ms", o.deadlineMs, { min: 1, max: 3_600_000, integer: true });
  if (o.nodeConfig !== undefined) Object.assign(config.node, parseNodeConfig(o.nodeConfig, config.policy));
  // The mode the nodes run: --node-config's, else --gossip, else the daemon's under --daemon-config.
  if (config.maxEstimates !== undefined && (config.node.gossip ?? simGossip(config)) !== "scuttlebutt")
    throw new CliError("--max-estimates needs --gossip scuttlebutt (the default of --daemon-config)");
  const faults = parseFaultFlags(o, config.nodes, config.seed);
  if (faults !== undefined) config.faults = faults;
  const requests =
    o.requests === undefined
      ? undefined
      : parseNumber("--requests", o.requests, { min: 1, max: 10_000_000, integer: true });
  const rate =
    o.rate === undefined ? undefined : parseNumber("--rate", o.rate, { min: 0.001, max: 1_000_000 });
  return {
    config,
    workload,
    mmluDir: o.mmluDir ?? DEFAULT_MMLU_DIR,
    requests,
    rate,
  };
}

/** `--node-config`: a JSON object of node settings, checked by the node's own schema. */
function parseNodeConfig(json: string, policy: string): NonNullable<SimConfig["node"]> {
  let v: unknown;
  try {
    v = JSON.parse(json);
  } catch {
    throw new CliError("--node-config must be a JSON object");
  }
  if (typeof v !== "object" || v === null || Array.isArray(v))
    throw new CliError("--node-config must be a JSON object");
  for (const k of ["id", "peers", "policy", "capacityTokens", "pollMs"])
    if (k in v) throw new CliError(`--node-config: ${k} is set by the simulator's own flags`);
  const r = nodeConfigSchema.safeParse({ id: "n0", capacityTokens: 1, ...v, policy });
  if (!r.success)
    throw new CliError(
      `--node-config: ${r.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`,
    );
  const unknown = droppedKeys(v, r.data);
  if (unknown.length > 0) throw new CliError(`--node-config: not a node setting: ${unknown.join(", ")}`);
  return v as NonNullable<SimConfig["node"]>;
}

/** A node-config number from its flag (`--forward-ack-timeout-ms` for forwardAckTimeoutMs), checked by the schema. */
function nodeSetting(key: NodeConfigNumberKey, raw: string): number {
  return parseFlag(nodeConfigNumber(key), key, raw);
}
