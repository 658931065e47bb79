/**
 * One node 10× slower, in the daemon's shipped configuration (gossip "scuttlebutt", advertised
 * costs, offload), fixed seed, open loop: once every node knows each other's speed, the slow node
 * sends almost all its clients' work to its faster peers, nobody routes to it for a cache it holds
 * unless that saves more than its slowness costs, and the tail after the warm-up stays within 2× the
 * fault-free run's.
 */
import { describe, expect, it } from "vitest";
import { runSimulation } from "../../src/sim/run.js";
import type { SimResult } from "../../src/sim/types.js";
import { assembleWorkload } from "../../src/workload/assemble.js";
import { syntheticPool } from "../../src/workload/synthetic.js";
import { daemonSimConfig } from "./helpers.js";

const SLOW = 1;
const REQUESTS = 1_500;
/** Requests from this one on: every cache started empty, the cold start is load, not the fault. */
const WARM = 500;
const workload = assembleWorkload("synthetic", "synthetic", syntheticPool({ subjects: 8, scale: 0.05 }), {
  seed: 3,
  requests: REQUESTS,
  skewed: false,
  openLoopRate: 6,
});

function run(slow: boolean): SimResult {
  return runSimulation(
    {
      ...daemonSimConfig(5, 4),
      capacityTokens: 20_000,
      checkInvariants: true,
      ...(slow ? { faults: { engine: { slowdowns: [{ node: SLOW, factor: 10 }] } } } : {}),
    },
    workload,
  );
}

function p99(r: SimResult): number {
  const lat = r.records
    .filter((x) => x.index >= WARM)
    .map((x) => x.latencyMs)
    .sort((a, b) => a - b);
  return lat[Math.floor(0.99 * lat.length)] as number;
}

describe("one node 10× slower (daemon configuration)", () => {
  it("hands its clients' work to faster peers, and the warm tail stays within 2× fault-free", () => {
    const plain = run(false);
    const slow = run(true);
    for (const r of [plain, slow]) {
      expect(r.invariantViolations).toEqual([]);
      expect(r.totals.answered).toBe(REQUESTS);
      expect(r.totals.incorrect).toBe(0);
      expect(r.totals.duplicateReplies).toBe(0);
    }
    const warm = slow.records.filter((x) => x.index >= WARM);
    const own = warm.filter((x) => x.entry === SLOW);
    const kept = own.filter((x) => x.served === SLOW).length;
    const others = warm.filter((x) => x.entry !== SLOW && x.served === SLOW).length;
    expect(own.length).toBeGreaterThan(100);
    expect(kept / own.length).toBeLessThan(0.03);
    expect(others).toBeLessThan(0.01 * warm.length);
    expect(p99(slow)).toBeLessThanOrEqual(2 * p99(plain));
  });
});
