/**
 * Cost-aware routing in the simulator (synthetic MMLU-shaped workload, seed-fixed): it never loses to
 * serving locally, beats it when the network is fast, and the oracle reference is at least as well
 * informed as the paper's affinity routing.
 */
import { describe, expect, it } from "vitest";
import type { PolicyName } from "../../src/core/node/policies/index.js";
import { runSimulation } from "../../src/sim/run.js";
import type { SimConfig } from "../../src/sim/types.js";
import { syntheticMmlu } from "../../src/workload/synthetic.js";
import { smallCluster } from "./helpers.js";

const workload = syntheticMmlu({ seed: 5, requests: 3000 });

function run(policy: PolicyName, commMs: number, extra: Partial<SimConfig> = {}) {
  return runSimulation(
    smallCluster({
      policy,
      commMs,
      pollMs: 500,
      seed: 5,
      capacityTokens: undefined,
      keepRecords: false,
      ...extra,
    }),
    workload,
  ).totals;
}

describe("cost-aware routing (simulated)", () => {
  it("at Δcomm 1 s it does not lose to serving locally", () => {
    const local = run("local", 1000);
    const cost = run("cost-aware", 1000);
    expect(cost.answered).toBe(3000);
    expect(cost.meanLatencyMs).toBeLessThanOrEqual(local.meanLatencyMs * 1.02);
  });

  it("at Δcomm 2 ms it beats serving locally", () => {
    const local = run("local", 2);
    const cost = run("cost-aware", 2);
    expect(cost.meanLatencyMs).toBeLessThan(local.meanLatencyMs);
    expect(cost.forwardedShare).toBeGreaterThan(0.1);
  });

  it("the oracle reference's hit rate is at least affinity's", () => {
    const affinity = run("affinity", 2);
    const oracle = run("affinity", 2, { oracle: true });
    expect(oracle.actualHitRate).toBeGreaterThanOrEqual(affinity.actualHitRate);
    expect(oracle.answered).toBe(3000);
    // Oracle refreshes are free: the traffic is the ordinary protocol's only. (Counted, they would
    // multiply it: one refresh per changed peer pair after nearly every event.)
    expect(oracle.messagesTotal).toBeLessThanOrEqual(affinity.messagesTotal * 1.05);
  });

  it("oracle runs keep the protocol's invariants", () => {
    const r = runSimulation(
      smallCluster({
        nodes: 3,
        policy: "cost-aware",
        commMs: 5,
        jitterMs: 1,
        pollMs: 200,
        capacityTokens: 8000,
        seed: 9,
        oracle: true,
        checkInvariants: true,
        settleMs: 2000,
      }),
      syntheticMmlu({ seed: 9, requests: 300 }),
    );
    expect(r.invariantViolations).toEqual([]);
    expect(r.totals.incorrect).toBe(0);
  });
});
