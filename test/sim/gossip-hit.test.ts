/**
 * Hit rate of the scuttlebutt mesh against the oracle, in the scale experiment's setting (open loop,
 * 2 requests/s per node, Δcomm 2 ms, cost-aware; synthetic MMLU-shaped workload, seed-fixed). A node
 * there measures the RTT of only the members it talks to: priced at the cold 250 ms prior, the
 * unmeasured rest were never forwarded to (issue 14: 0.77× the oracle at 16 nodes).
 */
import { describe, expect, it } from "vitest";
import type { PrefixNode } from "../../src/core/node/node.js";
import { simConfigOf } from "../../src/experiments/scale/execute.js";
import { runSimulation } from "../../src/sim/run.js";
import { syntheticMmlu } from "../../src/workload/synthetic.js";

const NODES = 16;
const ARRIVAL_S = 5;

function hit(kind: "main" | "oracle", mode: "full" | "scuttlebutt", seed: number): number {
  const workload = syntheticMmlu({
    seed,
    requests: 2 * NODES * ARRIVAL_S,
    openLoopRate: 2 * NODES,
  });
  const config = simConfigOf({ kind, mode, nodes: NODES, loss: 0, seed, arrivalS: ARRIVAL_S });
  const t = runSimulation(config, workload).totals;
  expect(t.answered).toBe(workload.requests.length);
  return t.actualHitRate;
}

describe("scuttlebutt mesh hit rate (simulated)", () => {
  it.each([1, 2, 3])("is within 0.95× the oracle's at 16 nodes (seed %i)", (seed) => {
    const oracle = hit("oracle", "full", seed);
    const sb = hit("main", "scuttlebutt", seed);
    expect(oracle).toBeGreaterThan(0.05);
    expect(sb).toBeGreaterThanOrEqual(0.95 * oracle);
  });
});

describe("the RTT an unmeasured member is priced at", () => {
  it("is the median measured RTT under scuttlebutt, the config prior on the full mesh", () => {
    const workload = syntheticMmlu({ seed: 1, requests: 40, openLoopRate: 16 });
    const seen = { full: 0, scuttlebutt: 0, priced: 0 };
    for (const mode of ["full", "scuttlebutt"] as const) {
      const config = simConfigOf({ kind: "main", mode, nodes: 8, loss: 0, seed: 1, arrivalS: 5 });
      const probe = {
        everyMs: 100,
        observe(_now: number, nodes: readonly (PrefixNode | null)[]) {
          for (const n of nodes) {
            if (n === null) continue;
            const rtts = n
              .peers()
              .map((p) => p.rttMs)
              .filter((r) => r !== undefined)
              .sort((a, b) => a - b);
            const prior = n.learnedCosts().rttPriorMs;
            if (mode === "full" || rtts.length === 0) expect(prior).toBe(250);
            else {
              const m = rtts.length >> 1;
              const median = rtts.length % 2 ? rtts[m] : ((rtts[m - 1] as number) + (rtts[m] as number)) / 2;
              expect(prior).toBeCloseTo(median as number, 9);
              expect(prior).toBeLessThan(20); // Δcomm 2 ms each way
              if (rtts.length < n.peers().length) seen.priced++;
            }
            seen[mode]++;
          }
        },
      };
      runSimulation({ ...config, faults: {} }, workload, { probe });
    }
    expect(seen.full).toBeGreaterThan(0);
    expect(seen.scuttlebutt).toBeGreaterThan(0);
    // Some member was unmeasured while others were: the case the median prices.
    expect(seen.priced).toBeGreaterThan(0);
  });
});
