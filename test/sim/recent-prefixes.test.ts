/**
 * The open-loop cold start in the daemon's configuration, with and without `recentPrefixMs` (a
 * daemon default): a prompt queued or forwarded lately counts as cached where it went, so a second
 * request for a prefix still queued follows the first instead of computing it cold elsewhere. Fixed
 * seed: fewer cold prefills, a shorter tail; nothing lost, nothing answered twice.
 */
import { describe, expect, it } from "vitest";
import { DAEMON_NODE_DEFAULTS } from "../../src/core/node/config.js";
import { DEFAULT_PROFILE } from "../../src/engines/sim/profiles.js";
import { runSimulation } from "../../src/sim/run.js";
import type { SimResult } from "../../src/sim/types.js";
import { syntheticMmlu } from "../../src/workload/synthetic.js";

const SEED = 4;
/** 57 topics with MMLU's prefix lengths, at the fault report's open-loop rate. */
const workload = syntheticMmlu({ seed: SEED, requests: 1_200, openLoopRate: 6, scale: 0.1 });

function run(recentPrefixMs: number): SimResult {
  return runSimulation(
    {
      nodes: 4,
      policy: DAEMON_NODE_DEFAULTS.policy,
      daemonConfig: true,
      node: { recentPrefixMs },
      commMs: 2,
      jitterMs: 0.5,
      pollMs: 500,
      profile: DEFAULT_PROFILE,
      seed: SEED,
      checkInvariants: true,
    },
    workload,
  );
}

/** Runs that found less than half their prompt cached: a prefix computed (again). */
const coldPrefills = (r: SimResult) =>
  r.records.filter((x) => x.actualHitTokens < 0.5 * x.promptTokens).length;
const p99 = (r: SimResult) => {
  const lat = r.records.map((x) => x.latencyMs).sort((a, b) => a - b);
  return lat[Math.floor(0.99 * lat.length)] as number;
};

describe("cold start: a prefix queued or forwarded lately counts where it went", () => {
  it("computes fewer prefixes twice and shortens the tail", { timeout: 120_000 }, () => {
    expect(DAEMON_NODE_DEFAULTS.recentPrefixMs).toBeGreaterThan(0);
    const on = run(DAEMON_NODE_DEFAULTS.recentPrefixMs);
    const off = run(0);
    for (const r of [on, off]) {
      expect(r.invariantViolations).toEqual([]);
      expect(r.totals.answered).toBe(workload.requests.length);
      expect(r.totals.incorrect).toBe(0);
      expect(r.totals.duplicateReplies).toBe(0);
    }
    // Queues grew seconds long: the cold start is what is measured.
    expect(Math.max(...off.records.map((x) => x.queueMs))).toBeGreaterThan(5_000);
    expect(coldPrefills(on)).toBeLessThan(coldPrefills(off));
    expect(p99(on)).toBeLessThan(p99(off));
  });
});
