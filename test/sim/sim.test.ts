/** The simulator: determinism, invariants under seeded fault schedules, paper-shaped behaviour. */
import { describe, expect, it } from "vitest";
import { isPolicyName, POLICY_NAMES } from "../../src/core/node/policies/index.js";
import { faultFlags, faultScheduleFor } from "../../src/sim/fault-schedule.js";
import { runSimulation } from "../../src/sim/run.js";
import type { SimConfig } from "../../src/sim/types.js";
import { syntheticMmlu } from "../../src/workload/synthetic.js";
import { runProblems, seedChunks, smallCluster, tinyWorkload } from "./helpers.js";

const base: SimConfig = smallCluster();

describe("simulator", () => {
  it("is deterministic: same seed, identical run; another seed, another run", () => {
    const w = tinyWorkload({ seed: 3, requests: 300 });
    const strip = (r: ReturnType<typeof runSimulation>) => ({ ...r, wallMs: 0 });
    const a = strip(runSimulation(base, w));
    const b = strip(runSimulation(base, w));
    expect(JSON.stringify(b)).toBe(JSON.stringify(a));
    const c = strip(runSimulation({ ...base, seed: 2 }, w));
    expect(JSON.stringify(c.records)).not.toBe(JSON.stringify(a.records));
  });

  it("answers every request once, correctly, with all policies", () => {
    const w = tinyWorkload({ seed: 4, requests: 200 });
    for (const policy of POLICY_NAMES) {
      const r = runSimulation({ ...base, policy, checkInvariants: true, settleMs: 400 }, w);
      expect(r.totals.answered, policy).toBe(200);
      expect(r.totals.incorrect, policy).toBe(0);
      expect(r.totals.duplicateReplies, policy).toBe(0);
      expect(r.invariantViolations, policy).toEqual([]);
      if (policy === "local") expect(r.totals.forwardedShare).toBe(0);
      // (least-loaded sees every queue empty in a closed loop, so it keeps requests local)
      else if (policy !== "least-loaded") expect(r.totals.forwardedShare, policy).toBeGreaterThan(0);
    }
    expect(isPolicyName("nope")).toBe(false);
  });

  it("routing beats no-routing on a skewed, cache-constrained workload at Δcomm = 2 ms", () => {
    const w = tinyWorkload({ seed: 5, requests: 600, topics: 12, prefix: 400, suffix: 20 });
    const cfg = { ...base, capacityTokens: 2_000 };
    const local = runSimulation({ ...cfg, policy: "local" }, w);
    const routed = runSimulation({ ...cfg, policy: "affinity" }, w);
    expect(routed.totals.actualHitRate).toBeGreaterThan(local.totals.actualHitRate);
    expect(routed.totals.meanLatencyMs).toBeLessThan(local.totals.meanLatencyMs);
    // At 1 s per hop, forwarding costs more than any prefill it saves.
    const slow = runSimulation({ ...cfg, policy: "affinity", commMs: 1_000 }, w);
    expect(slow.totals.meanLatencyMs).toBeGreaterThan(local.totals.meanLatencyMs);
    expect(routed.totals.messages["snapshot-delta"]?.count ?? 0).toBeGreaterThan(0);
    expect(routed.totals.bytesTotal).toBeGreaterThan(0);
  });

  it("runs open-loop arrivals with queueing and push-back", () => {
    const w = tinyWorkload({ seed: 6, requests: 300, arrival: "open-loop", gapMs: 40 });
    const r = runSimulation(
      { ...base, checkInvariants: true, settleMs: 400, node: { pushBackQueueThreshold: 2, concurrency: 2 } },
      w,
    );
    expect(r.totals.answered).toBe(300);
    expect(r.invariantViolations).toEqual([]);
    expect(r.records.some((x) => x.queueMs > 0)).toBe(true);
  });

  it("push-back relieves a hot specialist under skewed open-loop load (§3.2)", () => {
    const w = syntheticMmlu({ seed: 1, openLoopRate: 6, nodes: 4, requests: 2_000, skewed: true });
    const cfg: SimConfig = { ...base, pollMs: 500, capacityTokens: undefined };
    const without = runSimulation({ ...cfg, node: { pushBackQueueThreshold: 1_000_000 } }, w);
    const withPb = runSimulation({ ...cfg, node: { pushBackQueueThreshold: 8 } }, w);
    expect(withPb.totals.hotspotShare).toBeLessThan(without.totals.hotspotShare - 0.03);
    expect(withPb.totals.p99LatencyMs).toBeLessThan(without.totals.p99LatencyMs);
    expect(withPb.totals.answered).toBe(2_000);
  });

  it("ends (with failures, not a hang) when every node is down for good", () => {
    const w = tinyWorkload({ seed: 8, requests: 50 });
    const crashes = [0, 1, 2, 3].map((node) => ({ node, atMs: 2_000 }));
    const r = runSimulation({ ...base, faults: { node: { crashes } } }, w);
    expect(r.totals.answered).toBeGreaterThan(0);
    expect(r.totals.answered + r.totals.failed).toBe(50);
    expect(r.totals.failed).toBeGreaterThan(0);
    expect(r.totals.incorrect).toBe(0);
  });

  it("rejects a bad config clearly", () => {
    const w = tinyWorkload({ seed: 1, requests: 1 });
    expect(() => runSimulation({ ...base, nodes: 0 }, w)).toThrow(/nodes/);
    expect(() => runSimulation({ ...base, pollMs: 0 }, w)).toThrow(/pollMs/);
    expect(() =>
      runSimulation({ ...base, faults: { node: { crashes: [{ node: 9, atMs: 1 }] } } }, w),
    ).toThrow(/crash node/);
  });
});

const SOAK = process.env.SOAK !== undefined;
const SEEDS = SOAK ? 2_000 : 200;
/** Requests per run, and the virtual time the faults are drawn over. */
const REQUESTS = SOAK ? 120 : 40;
const FAULT_WINDOW_MS = SOAK ? 15_000 : 5_000;
const K = 3;

/**
 * The other policies, answer probes on, a fast detector (k × 50 ms) and forward timeout: one fault
 * schedule per seed (faultScheduleFor). A failing seed prints its schedule as `prefixmesh sim` flags.
 */
describe(`invariants over ${SEEDS} seeded fault schedules, four policies`, () => {
  for (const seeds of seedChunks(SEEDS)) {
    const name = `seeds ${seeds[0]}–${seeds.at(-1)}: every request answered exactly once and correctly; tree = engine cache; estimates never regress; convergence after faults`;
    it(name, () => runSeeds(seeds), SOAK ? 1_800_000 : undefined);
  }
});

function runSeeds(seeds: number[]): void {
  const failures: string[] = [];
  for (const seed of seeds) {
    const nodes = 2 + (seed % 4);
    const w = tinyWorkload({ seed, requests: REQUESTS, topics: 4, prefix: 48 });
    const policy = (["affinity", "round-robin", "random", "least-loaded"] as const)[seed % 4]!;
    const r = runSimulation(
      {
        ...base,
        nodes,
        policy,
        seed,
        pollMs: 50,
        capacityTokens: 400,
        faults: faultScheduleFor(seed, nodes, FAULT_WINDOW_MS),
        checkInvariants: true,
        // Once faults stop, k × Δpoll (jitter included) must bring every estimate to its owner's tree.
        settleMs: K * 50 * 1.1 + 10,
        node: { suspectAfterPolls: K, forwardTimeoutMs: 300 },
        keepRecords: false,
      },
      w,
    );
    const bad = runProblems(r, REQUESTS);
    if (bad !== undefined) {
      failures.push(
        `seed ${seed} (${nodes} nodes, ${policy}): ${bad}\n    faults: ${faultFlags(r.config.faults).join(" ")}`,
      );
    }
  }
  expect(failures).toEqual([]);
}
