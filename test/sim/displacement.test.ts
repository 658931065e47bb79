/**
 * Rent-or-buy under eviction pressure (displacement.ts), in the daemon's shipped configuration: with
 * caches a quarter of the prefix working set and a 200 ms link, buying a prefix a peer holds keeps
 * another out of every cache, so cost-aware rents — and stays within 2% of affinity, which keeps
 * each prefix on one node — while at 1 s, where recomputing beats a round trip, it still serves
 * locally like `local`. Seeded synthetic MMLU-shaped workload.
 */
import { describe, expect, it } from "vitest";
import type { PolicyName } from "../../src/core/node/policies/index.js";
import { jitterFor } from "../../src/experiments/grid.js";
import { constrainedCapacity } from "../../src/experiments/workloads.js";
import { runSimulation } from "../../src/sim/run.js";
import { syntheticMmlu } from "../../src/workload/synthetic.js";
import { daemonSimConfig } from "./helpers.js";

const workload = syntheticMmlu({ seed: 2, requests: 2000 });
const capacityTokens = constrainedCapacity(workload);

function mean(policy: PolicyName, commMs: number): number {
  const daemon = daemonSimConfig(2, 4);
  const config =
    policy === "cost-aware" ? daemon : { ...daemon, policy, daemonConfig: false, pollMs: daemon.pollMs };
  const r = runSimulation({ ...config, commMs, jitterMs: jitterFor(commMs), capacityTokens }, workload);
  expect(r.totals.answered).toBe(2000);
  return r.totals.meanLatencyMs;
}

describe("cost-aware with a constrained cache (simulated, daemon config)", () => {
  it("rents where a duplicate's hole costs more than the round trips it saves (Δcomm 200 ms)", () => {
    expect(mean("cost-aware", 200)).toBeLessThanOrEqual(1.02 * mean("affinity", 200));
  }, 240_000);

  it("still serves locally where a round trip costs more than recomputing (Δcomm 1 s)", () => {
    expect(mean("cost-aware", 1000)).toBeLessThanOrEqual(1.02 * mean("local", 1000));
  }, 240_000);
});
