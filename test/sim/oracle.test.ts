/**
 * The oracle's shortcuts (only changed owners, and only the pairs a real snapshot reached, are
 * refreshed) must make exactly the refreshes the naive reference makes — every pair checked after
 * every event — so the routing and hits of a seeded run are identical.
 */
import { describe, expect, it } from "vitest";
import { Oracle, type Pushed } from "../../src/sim/oracle.js";
import { runSimulation } from "../../src/sim/run.js";
import type { SimConfig, SimResult } from "../../src/sim/types.js";
import { syntheticMmlu } from "../../src/workload/synthetic.js";
import { smallCluster } from "./helpers.js";

/** What routing decided and what it hit, per request, and the run's totals. */
function outcome(r: SimResult) {
  return {
    records: r.records.map((x) => [x.index, x.target, x.served, x.actualHitTokens, x.latencyMs, x.retries]),
    hit: r.totals.actualHitRate,
    messages: r.totals.messages,
    events: r.events,
    virtualMs: r.virtualMs,
  };
}

function both(over: Partial<SimConfig>, requests: number, seed: number) {
  const config = smallCluster({
    nodes: 6,
    policy: "cost-aware",
    pollMs: 200,
    capacityTokens: 8000,
    seed,
    oracle: true,
    settleMs: 1000,
    ...over,
  });
  const workload = syntheticMmlu({ seed, requests, openLoopRate: 30 });
  const fast = runSimulation(config, workload);
  const naive = runSimulation({ ...config, oracleExhaustive: true }, workload);
  return { fast, naive };
}

describe("oracle shortcuts = the naive full refresh", () => {
  it("the same routing, hits and traffic on a seeded run with a crash and a restart", () => {
    const { fast, naive } = both(
      { faults: { node: { crashes: [{ node: 5, atMs: 3000, restartAtMs: 6000 }] } } },
      240,
      11,
    );
    expect(fast.totals.answered).toBe(240);
    // Routing took peers (not all local), so the estimates mattered.
    expect(fast.totals.forwardedShare).toBeGreaterThan(0);
    expect(outcome(fast)).toEqual(outcome(naive));
  });

  it("the same with a paused node (refreshes to it wait until it resumes) and the centralized baseline", () => {
    const { fast, naive } = both(
      { policy: "centralized", faults: { node: { pauses: [{ node: 2, atMs: 2000, untilMs: 3500 }] } } },
      240,
      12,
    );
    expect(fast.totals.answered).toBe(240);
    expect(outcome(fast)).toEqual(outcome(naive));
  });
});

describe("Oracle bookkeeping", () => {
  const s: Pushed = { epoch: 1, version: 3, queueDepth: 0, pushBackMs: 0 };

  it("a real snapshot makes only its own pair need a refresh while the owner is unchanged", () => {
    const o = new Oracle(4);
    expect(o.peersToCheck(0, s)).toBe("all");
    for (const j of [1, 2, 3]) expect(o.take(0, j, s)).toBe(true);
    o.passed(0, s, true);
    expect(o.peersToCheck(0, s)).toEqual([]);
    expect(o.take(0, 2, s)).toBe(false);
    o.invalidate(0, 3);
    o.invalidate(0, 1);
    expect(o.peersToCheck(0, s)).toEqual([1, 3]);
    // The owner changed: every peer again.
    expect(o.peersToCheck(0, { ...s, queueDepth: 1 })).toBe("all");
  });

  it("an incomplete pass (a paused peer) leaves the owner to be checked against every peer again", () => {
    const o = new Oracle(3);
    o.take(0, 1, s);
    o.passed(0, s, false);
    expect(o.peersToCheck(0, s)).toBe("all");
    o.passed(0, s, true);
    expect(o.peersToCheck(0, s)).toEqual([]);
    // A restart forgets every owner's pass.
    o.reset();
    expect(o.peersToCheck(0, s)).toBe("all");
  });
});
