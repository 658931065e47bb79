/** Fault schedules drawn from a seed: reproducible, varied, within their window, and runnable. */
import { describe, expect, it } from "vitest";
import { faultFlags, faultScheduleFor } from "../../src/sim/fault-schedule.js";
import { runSimulation } from "../../src/sim/run.js";
import type { SimFaults } from "../../src/sim/types.js";
import { smallCluster, tinyWorkload } from "./helpers.js";

const SEEDS = Array.from({ length: 300 }, (_, i) => i + 1);
const DURATION = 10_000;

/** Every time a schedule names, and every node. */
function timesOf(f: SimFaults): { times: number[]; nodes: number[] } {
  const times: number[] = [];
  const nodes: number[] = [];
  for (const p of f.network?.partitions ?? []) {
    times.push(p.startMs, p.endMs);
    nodes.push(...p.groups.flat());
  }
  if (f.network?.untilMs !== undefined) times.push(f.network.untilMs);
  for (const s of f.engine?.slowdowns ?? []) {
    nodes.push(s.node);
    if (s.atMs !== undefined) times.push(s.atMs);
    if (s.untilMs !== undefined) times.push(s.untilMs);
  }
  for (const c of f.node?.crashes ?? []) {
    nodes.push(c.node);
    times.push(c.atMs, ...(c.restartAtMs === undefined ? [] : [c.restartAtMs]));
  }
  for (const p of f.node?.pauses ?? []) {
    nodes.push(p.node);
    times.push(p.atMs, p.untilMs);
  }
  return { times, nodes };
}

describe("faultScheduleFor", () => {
  it("gives one schedule per seed, and different seeds different schedules", () => {
    for (const seed of SEEDS.slice(0, 20))
      expect(faultScheduleFor(seed, 4, DURATION)).toEqual(faultScheduleFor(seed, 4, DURATION));
    const distinct = new Set(SEEDS.map((s) => JSON.stringify(faultScheduleFor(s, 4, DURATION))));
    expect(distinct.size).toBeGreaterThan(SEEDS.length * 0.95);
  });

  it("draws every fault class, each present in some schedules and absent in others", () => {
    const schedules = SEEDS.map((s) => faultScheduleFor(s, 4, DURATION));
    const classes: [string, (f: SimFaults) => boolean][] = [
      ["loss", (f) => f.network?.lossProb !== undefined],
      ["duplication", (f) => f.network?.dupProb !== undefined],
      ["reordering", (f) => f.network?.reorderProb !== undefined],
      ["partitions", (f) => (f.network?.partitions?.length ?? 0) > 0],
      ["three-way partitions", (f) => (f.network?.partitions ?? []).some((p) => p.groups.length === 3)],
      ["engine failures", (f) => f.engine?.failProb !== undefined],
      ["slow engines", (f) => (f.engine?.slowdowns?.length ?? 0) > 0],
      ["crashes", (f) => (f.node?.crashes?.length ?? 0) > 0],
      ["crashes for good", (f) => (f.node?.crashes ?? []).some((c) => c.restartAtMs === undefined)],
      ["pauses", (f) => (f.node?.pauses?.length ?? 0) > 0],
    ];
    for (const [name, has] of classes) {
      const n = schedules.filter(has).length;
      expect(n, name).toBeGreaterThan(0);
      expect(n, name).toBeLessThan(schedules.length);
    }
    expect(schedules.some((f) => Object.keys(f).length === 0)).toBe(true);
  });

  it("stays within the window and the nodes; probabilities in (0, 0.3]; never all nodes down for good", () => {
    for (const nodes of [1, 2, 4, 7]) {
      for (const seed of SEEDS) {
        const f = faultScheduleFor(seed, nodes, DURATION);
        const { times, nodes: named } = timesOf(f);
        for (const t of times) {
          expect(Number.isInteger(t)).toBe(true);
          expect(t).toBeGreaterThanOrEqual(0);
          expect(t).toBeLessThanOrEqual(DURATION);
        }
        for (const n of named) expect(n >= 0 && n < nodes).toBe(true);
        const probs = [f.network?.lossProb, f.network?.dupProb, f.network?.reorderProb, f.engine?.failProb];
        for (const p of probs) if (p !== undefined) expect(p > 0 && p <= 0.3).toBe(true);
        for (const p of f.network?.partitions ?? []) {
          expect(p.endMs).toBeGreaterThan(p.startMs);
          expect(p.groups.flat().sort()).toEqual(Array.from({ length: nodes }, (_, k) => k));
          for (const g of p.groups) expect(g.length).toBeGreaterThan(0);
        }
        const crashes = f.node?.crashes ?? [];
        expect(new Set(crashes.map((c) => c.node)).size).toBe(crashes.length);
        const forGood = crashes.filter((c) => c.restartAtMs === undefined).length;
        expect(forGood).toBeLessThanOrEqual(nodes >= 2 ? 1 : 0);
      }
    }
  });

  it("prints as the flags that replay it", () => {
    const f: SimFaults = {
      network: {
        lossProb: 0.05,
        reorderProb: 0.1,
        reorderMaxMs: 30,
        untilMs: 4000,
        partitions: [{ startMs: 1, endMs: 9, groups: [[0, 2], [1]] }],
      },
      engine: {
        failProb: 0.01,
        slowdowns: [
          { node: 1, factor: 2.5 },
          { node: 2, factor: 3, atMs: 10, untilMs: 20 },
        ],
      },
      node: {
        crashes: [
          { node: 0, atMs: 5, restartAtMs: 50 },
          { node: 1, atMs: 7 },
        ],
        pauses: [{ node: 2, atMs: 3, untilMs: 4 }],
      },
    };
    expect(faultFlags(f).join(" ")).toBe(
      "--loss 0.05 --reorder 0.1 --reorder-max-ms 30 --faults-until-ms 4000 --partition 0,2/1@1:9 --engine-fail 0.01 --slow-engine 1x2.5 --slow-engine 2x3@10:20 --crash 0@5:50 --crash 1@7 --pause 2@3:4",
    );
    expect(faultFlags(undefined)).toEqual([]);
  });

  it("is a schedule the simulator runs", () => {
    const w = tinyWorkload({ seed: 1, requests: 20 });
    for (const seed of SEEDS.slice(0, 10)) {
      const r = runSimulation(smallCluster({ seed, faults: faultScheduleFor(seed, 4, 3_000) }), w);
      expect(r.totals.answered + r.totals.failed).toBe(20);
    }
  });

  it("refuses a meaningless request clearly", () => {
    expect(() => faultScheduleFor(Number.NaN, 4, 1_000)).toThrow(/seed/);
    expect(() => faultScheduleFor(1, 0, 1_000)).toThrow(/nodes/);
    expect(() => faultScheduleFor(1, 4, 0)).toThrow(/durationMs/);
  });
});
