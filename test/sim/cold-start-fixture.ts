/**
 * The open-loop cold start both daemon-default cold-start rules are measured on (push-back by cache,
 * recent prefixes): 4 nodes in the daemon's configuration, empty caches, MMLU-shaped prefixes at the
 * fault report's open-loop rate; one node setting varied, everything else fixed.
 */
import { expect } from "vitest";
import { DAEMON_NODE_DEFAULTS } from "../../src/core/node/config.js";
import { DEFAULT_PROFILE } from "../../src/engines/sim/profiles.js";
import { runSimulation } from "../../src/sim/run.js";
import type { SimConfig, SimResult } from "../../src/sim/types.js";
import { syntheticMmlu } from "../../src/workload/synthetic.js";

const SEED = 4;
/** 57 topics with MMLU's prefix lengths, at the fault report's open-loop rate. */
export const coldStartWorkload = syntheticMmlu({ seed: SEED, requests: 1_200, openLoopRate: 6, scale: 0.1 });

export function coldStartRun(node: SimConfig["node"]): SimResult {
  return runSimulation(
    {
      nodes: 4,
      policy: DAEMON_NODE_DEFAULTS.policy,
      daemonConfig: true,
      node,
      commMs: 2,
      jitterMs: 0.5,
      pollMs: 500,
      profile: DEFAULT_PROFILE,
      seed: SEED,
      checkInvariants: true,
    },
    coldStartWorkload,
  );
}

/** Runs that found less than half their prompt cached: a prefix computed (again). */
export const coldPrefills = (r: SimResult) =>
  r.records.filter((x) => x.actualHitTokens < 0.5 * x.promptTokens).length;

export const p99 = (r: SimResult) => {
  const lat = r.records.map((x) => x.latencyMs).sort((a, b) => a - b);
  return lat[Math.floor(0.99 * lat.length)] as number;
};

/** Nothing lost, nothing answered twice or wrong, every invariant held. */
export function expectCleanRun(r: SimResult): void {
  expect(r.invariantViolations).toEqual([]);
  expect(r.totals.answered).toBe(coldStartWorkload.requests.length);
  expect(r.totals.incorrect).toBe(0);
  expect(r.totals.duplicateReplies).toBe(0);
}
