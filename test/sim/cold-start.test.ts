/**
 * The cold start in the daemon's configuration: every cache empty while open-loop arrivals keep
 * coming, so every node's queue passes the push-back threshold and every node pushes back. With
 * `pushBackByCache` (a daemon default) a request whose prefix only a pushing-back peer holds still
 * goes there when the prefill it saves outweighs that peer's longer queue; off (queue depths alone),
 * it computes the prefix again on its own busy node. Fixed seed: fewer cold prefills, a shorter tail.
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

function run(pushBackByCache: boolean): SimResult {
  return runSimulation(
    {
      nodes: 4,
      policy: DAEMON_NODE_DEFAULTS.policy,
      daemonConfig: true,
      node: { pushBackByCache },
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

describe("cold start: push-back weighs what a peer's cache saves", () => {
  it("computes fewer prefixes twice and shortens the tail", { timeout: 120_000 }, () => {
    expect(DAEMON_NODE_DEFAULTS.pushBackByCache).toBe(true);
    const on = run(true);
    const off = run(false);
    for (const r of [on, off]) {
      expect(r.invariantViolations).toEqual([]);
      expect(r.totals.answered).toBe(workload.requests.length);
      expect(r.totals.incorrect).toBe(0);
      expect(r.totals.duplicateReplies).toBe(0);
    }
    // Queues grew seconds long (past the push-back threshold): the cold start is what is measured.
    expect(Math.max(...off.records.map((x) => x.queueMs))).toBeGreaterThan(5_000);
    expect(coldPrefills(on)).toBeLessThan(coldPrefills(off));
    expect(p99(on)).toBeLessThan(p99(off));
  });
});
