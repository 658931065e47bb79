import { describe, expect, it } from "vitest";
import { Prng } from "../../src/core/prng.js";
import {
  poissonArrivals,
  resolveSkew,
  roundRobinEntries,
  skewedSchedule,
  uniformSchedule,
} from "../../src/workload/schedule.js";
import { syntheticMmlu, syntheticPool } from "../../src/workload/synthetic.js";

/** 57 groups with MMLU-like uneven sizes; ids are global. */
function mmluLikePool(): number[][] {
  const items = syntheticPool();
  const groups = new Map<string, number[]>();
  items.forEach((it, i) => {
    const g = groups.get(it.group) ?? [];
    g.push(i);
    groups.set(it.group, g);
  });
  return [...groups.values()];
}

const pool = mmluLikePool();
const groupOf = new Map<number, number>();
pool.forEach((g, gi) => {
  for (const id of g) groupOf.set(id, gi);
});

describe("schedules", () => {
  it("uniform is a seeded permutation of every item", () => {
    const a = uniformSchedule(1000, new Prng(7)).order;
    expect([...a].sort((x, y) => x - y)).toEqual(Array.from({ length: 1000 }, (_, i) => i));
    expect(uniformSchedule(1000, new Prng(7)).order).toEqual(a);
    expect(uniformSchedule(1000, new Prng(8)).order).not.toEqual(a);
    expect(uniformSchedule(10, new Prng(1), 25).order).toHaveLength(25);
  });

  for (const repeats of [true, false]) {
    it(`hot-set skew ${repeats ? "with" : "without"} repeats: 80% of requests from 20% of groups (±2%)`, () => {
      const skew = resolveSkew({ kind: "hot-set", repeats })!;
      const s = skewedSchedule(pool, skew, new Prng(3));
      expect(s.hotGroups).toHaveLength(11); // round(0.2 × 57)
      const hot = new Set(s.hotGroups);
      const share = s.order.filter((id) => hot.has(groupOf.get(id)!)).length / s.order.length;
      expect(share).toBeGreaterThan(0.78);
      expect(share).toBeLessThan(0.82);
      const distinct = new Set(s.order).size;
      if (repeats) {
        expect(s.order).toHaveLength(14_042);
        expect(distinct).toBeLessThan(s.order.length); // draws with replacement do repeat
      } else {
        expect(distinct).toBe(s.order.length);
      }
    });
  }

  it("hot-set without repeats refuses more requests than the hot items allow", () => {
    const skew = resolveSkew({ kind: "hot-set", repeats: false })!;
    expect(() => skewedSchedule(pool, skew, new Prng(3), 14_042)).toThrow(/holds at most \d+ requests/);
  });

  it("zipf(1) with repeats follows rank weights", () => {
    const s = skewedSchedule(pool, resolveSkew({ kind: "zipf", s: 1 })!, new Prng(5));
    const counts = new Map<number, number>();
    for (const id of s.order) counts.set(groupOf.get(id)!, (counts.get(groupOf.get(id)!) ?? 0) + 1);
    const h57 = Array.from({ length: 57 }, (_, k) => 1 / (k + 1)).reduce((a, b) => a + b, 0);
    const top = (counts.get(s.hotGroups[0]!) ?? 0) / s.order.length;
    expect(Math.abs(top - 1 / h57)).toBeLessThan(0.02);
    const second = (counts.get(s.hotGroups[1]!) ?? 0) / s.order.length;
    expect(Math.abs(second - 0.5 / h57)).toBeLessThan(0.02);
  });

  it("zipf without repeats never reuses an item", () => {
    const s = skewedSchedule(pool, resolveSkew({ kind: "zipf", s: 1.2, repeats: false })!, new Prng(5));
    expect(new Set(s.order).size).toBe(s.order.length);
    expect(s.order.length).toBeGreaterThan(100);
  });

  it("rejects nonsense skew parameters", () => {
    expect(() => resolveSkew({ kind: "hot-set", hotShare: 1.5 })).toThrow(/hotShare/);
    expect(() => resolveSkew({ kind: "zipf", s: 0 })).toThrow(/zipf exponent/);
  });

  it("round-robin entries and Poisson arrivals", () => {
    expect(roundRobinEntries(6, 4)).toEqual([0, 1, 2, 3, 0, 1]);
    const t = poissonArrivals(20_000, 50, new Prng(9));
    for (let i = 1; i < t.length; i++) expect(t[i]!).toBeGreaterThanOrEqual(t[i - 1]!);
    const meanGap = t[t.length - 1]! / t.length;
    expect(Math.abs(meanGap - 20)).toBeLessThan(0.6); // 1000 ms / 50 per s
    expect(() => poissonArrivals(1, 0, new Prng(1))).toThrow(/rate/);
  });
});

describe("workload assembly", () => {
  it("is deterministic by seed and differs across seeds", () => {
    const a = syntheticMmlu({ seed: 11, scale: 0.1, skewed: true });
    const b = syntheticMmlu({ seed: 11, scale: 0.1, skewed: true });
    const c = syntheticMmlu({ seed: 12, scale: 0.1, skewed: true });
    expect(a.requests.map((r) => r.id)).toEqual(b.requests.map((r) => r.id));
    expect(a.requests.map((r) => r.id)).not.toEqual(c.requests.map((r) => r.id));
    expect(a.meta?.repeatedRequests).toBeGreaterThan(0);
  });

  it("open loop sets arrival times; nodes sets round-robin entries", () => {
    const w = syntheticMmlu({ seed: 1, scale: 0.05, openLoopRate: 10, nodes: 4 });
    expect(w.arrival).toBe("open-loop");
    expect(w.requests.every((r) => typeof r.arrivalMs === "number")).toBe(true);
    expect(w.requests.slice(0, 5).map((r) => r.entry)).toEqual([0, 1, 2, 3, 0]);
    // The arrival stream is separate from the order stream: same order as closed loop.
    const closed = syntheticMmlu({ seed: 1, scale: 0.05 });
    expect(closed.arrival).toBe("closed-loop");
    expect(w.requests.map((r) => r.id)).toEqual(closed.requests.map((r) => r.id));
  });
});
