/**
 * One unbounded request (a long generation: the daemon's max_tokens ceiling), in the daemon's
 * configuration with offload on (not a daemon default yet), fixed seed, open loop: the other requests
 * entering the node running it go to idle peers instead of queueing behind it, and keep their p99
 * within 2× the fault-free run. Without offload, those that stay wait for it.
 */
import { describe, expect, it } from "vitest";
import { DAEMON_NODE_DEFAULTS } from "../../src/core/node/config.js";
import { DEFAULT_PROFILE } from "../../src/engines/sim/profiles.js";
import { nodeSettingsSchema } from "../../src/server/settings/index.js";
import { runSimulation } from "../../src/sim/run.js";
import type { SimConfig, SimResult } from "../../src/sim/types.js";
import { assembleWorkload } from "../../src/workload/assemble.js";
import { syntheticPool } from "../../src/workload/synthetic.js";
import type { Workload } from "../../src/workload/types.js";

const NODES = 4;
const base = assembleWorkload("synthetic", "synthetic", syntheticPool({ subjects: 8, scale: 0.05 }), {
  seed: 11,
  requests: 2_000,
  skewed: false,
  openLoopRate: 4,
});
/**
 * Request 200 asks for as many tokens as the daemon lets one request ask for (its max_tokens
 * ceiling; a chat request without max_tokens gets far fewer): seconds of decode, versus a few ms.
 */
const CEILING = nodeSettingsSchema.shape.maxTokensCeiling.def.defaultValue as number;
const LONG = 200;
const withLong: Workload = {
  ...base,
  requests: base.requests.map((r, i) => (i === LONG ? { ...r, maxTokens: CEILING } : r)),
};

function run(workload: Workload, offload: boolean): SimResult {
  const config: SimConfig = {
    nodes: NODES,
    policy: DAEMON_NODE_DEFAULTS.policy,
    daemonConfig: true,
    node: { offload },
    commMs: 2,
    jitterMs: 0.5,
    pollMs: 500,
    profile: DEFAULT_PROFILE,
    capacityTokens: 3_000,
    seed: 7,
    checkInvariants: true,
  };
  return runSimulation(config, workload);
}

/** p99 latency of the requests (other than the long one) that entered `node`. */
function p99At(r: SimResult, node: number): number {
  const lat = r.records
    .filter((x) => x.entry === node && x.index !== LONG)
    .map((x) => x.latencyMs)
    .sort((a, b) => a - b);
  return lat[Math.floor(0.99 * lat.length)] as number;
}

describe("offload: one unbounded request", () => {
  it("does not hold the other requests entering its node (p99 ≤ 2× fault-free)", () => {
    const plain = run(base, true);
    const long = run(withLong, true);
    for (const r of [plain, long]) {
      expect(r.invariantViolations).toEqual([]);
      expect(r.totals.answered).toBe(base.requests.length);
      expect(r.totals.incorrect).toBe(0);
      expect(r.totals.duplicateReplies).toBe(0);
    }
    // The long request really ran long.
    // The long request really ran long, on some node: the requests entering that node are measured.
    const at = long.records.find((x) => x.index === LONG);
    expect(at?.decodeMs).toBeGreaterThan(CEILING);
    const node = at?.served as number;
    expect(p99At(long, node)).toBeLessThanOrEqual(2 * p99At(plain, node));
    // While it runs, nothing entering its node waits for it: without offload, what stayed there did.
    // (Routing differs with offload, so the long request may run on another node there: each run is
    // measured at the node that ran it, while it ran.)
    const without = run(withLong, false);
    const during = (r: SimResult) => {
      const l = r.records.find((x) => x.index === LONG) as SimResult["records"][number];
      return Math.max(
        ...r.records
          .filter(
            (x) => x.entry === l.served && x.index !== LONG && x.startMs >= l.startMs && x.startMs < l.endMs,
          )
          .map((x) => x.latencyMs),
      );
    };
    expect(during(long)).toBeLessThan(during(without) / 2);
  });
});
