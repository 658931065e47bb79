/** The Zipf skew over subjects: shares follow the exponent (seeded, statistically), parameters are checked. */
import { describe, expect, it } from "vitest";
import { Prng } from "../../src/core/prng.js";
import type { Pool } from "../../src/workload/schedule.js";
import { MAX_ZIPF_S, resolveSkew, skewedSchedule, zipfShares } from "../../src/workload/schedule.js";
import { syntheticMmlu, syntheticPool } from "../../src/workload/synthetic.js";

function mmluLikePool(): { pool: number[][]; groupOf: Int32Array } {
  const items = syntheticPool();
  const byGroup = new Map<string, number[]>();
  items.forEach((it, i) => {
    const g = byGroup.get(it.group) ?? [];
    g.push(i);
    byGroup.set(it.group, g);
  });
  const pool = [...byGroup.values()];
  const groupOf = new Int32Array(items.length);
  pool.forEach((g, gi) => {
    for (const id of g) groupOf[id] = gi;
  });
  return { pool, groupOf };
}

const { pool, groupOf } = mmluLikePool();

/** Requests per Zipf rank (index 0 = the top-ranked group). */
function rankCounts(p: Pool, order: readonly number[], ranked: readonly number[]): number[] {
  const rankOf = new Map(ranked.map((g, k) => [g, k]));
  const counts = new Array<number>(p.length).fill(0);
  for (const id of order) counts[rankOf.get(groupOf[id]!)!]!++;
  return counts;
}

/** Pearson's chi-square of counts against shares, tail bins merged until each expects ≥ 5. */
function chiSquare(counts: readonly number[], shares: readonly number[]): { stat: number; dof: number } {
  const n = counts.reduce((a, b) => a + b, 0);
  let stat = 0;
  let bins = 0;
  let obs = 0;
  let exp = 0;
  for (let k = 0; k < counts.length; k++) {
    obs += counts[k]!;
    exp += n * shares[k]!;
    const rest = shares.slice(k + 1).reduce((a, b) => a + b, 0) * n;
    if (exp >= 5 && (rest >= 5 || k === counts.length - 1)) {
      stat += (obs - exp) ** 2 / exp;
      bins++;
      obs = 0;
      exp = 0;
    }
  }
  if (exp > 0) {
    stat += (obs - exp) ** 2 / exp;
    bins++;
  }
  return { stat, dof: bins - 1 };
}

/** Upper 99.9% point of chi-square with `dof` degrees of freedom (Wilson–Hilferty). */
function chi2Crit999(dof: number): number {
  const z = 3.09;
  const a = 2 / (9 * dof);
  return dof * (1 - a + z * Math.sqrt(a)) ** 3;
}

/** Maximum-likelihood Zipf exponent from rank counts (golden-section search on (0, MAX]). */
function fitExponent(counts: readonly number[]): number {
  const n = counts.reduce((a, b) => a + b, 0);
  const logLik = (s: number) => {
    let h = 0;
    let sum = 0;
    counts.forEach((c, k) => {
      h += (k + 1) ** -s;
      sum += c * -s * Math.log(k + 1);
    });
    return sum - n * Math.log(h);
  };
  let lo = 0.01;
  let hi = MAX_ZIPF_S;
  const g = (Math.sqrt(5) - 1) / 2;
  for (let i = 0; i < 200; i++) {
    const a = hi - g * (hi - lo);
    const b = lo + g * (hi - lo);
    if (logLik(a) < logLik(b)) lo = a;
    else hi = b;
  }
  return (lo + hi) / 2;
}

describe("Zipf skew over subjects", () => {
  for (const s of [0.6, 1.1, 2]) {
    it(`s = ${s} with repeats: per-rank shares pass chi-square and the fitted exponent is s ± 0.05`, () => {
      for (const seed of [1, 2, 3]) {
        const sched = skewedSchedule(pool, resolveSkew({ kind: "zipf", s })!, new Prng(seed));
        expect(sched.order).toHaveLength(14_042);
        const counts = rankCounts(pool, sched.order, sched.hotGroups);
        const { stat, dof } = chiSquare(counts, zipfShares(pool.length, s));
        expect(stat, `seed ${seed}: chi-square ${stat.toFixed(1)} on ${dof} dof`).toBeLessThan(
          chi2Crit999(dof),
        );
        expect(Math.abs(fitExponent(counts) - s)).toBeLessThan(0.05);
      }
    });
  }

  it("the same checks tell neighbouring exponents apart (the test has power)", () => {
    const sched = skewedSchedule(pool, resolveSkew({ kind: "zipf", s: 1.1 })!, new Prng(1));
    const counts = rankCounts(pool, sched.order, sched.hotGroups);
    const { stat, dof } = chiSquare(counts, zipfShares(pool.length, 0.9));
    expect(stat).toBeGreaterThan(chi2Crit999(dof));
    expect(Math.abs(fitExponent(counts) - 0.9)).toBeGreaterThan(0.1);
  });

  it("without repeats: every question at most once, shares still follow the exponent", () => {
    const sched = skewedSchedule(pool, resolveSkew({ kind: "zipf", s: 1.1, repeats: false })!, new Prng(4));
    expect(new Set(sched.order).size).toBe(sched.order.length);
    expect(sched.order.length).toBeGreaterThan(1000);
    const counts = rankCounts(pool, sched.order, sched.hotGroups);
    expect(Math.abs(fitExponent(counts) - 1.1)).toBeLessThan(0.1);
    // Asking for more requests than there are questions is refused, not silently truncated.
    expect(() =>
      skewedSchedule(pool, resolveSkew({ kind: "zipf", s: 1.1, repeats: false })!, new Prng(4), 20_000),
    ).toThrow(/only 14042 distinct items/);
  });

  it("is seeded: same seed, same schedule and ranking; another seed, another ranking", () => {
    const a = syntheticMmlu({ seed: 9, scale: 0.2, skewed: { kind: "zipf", s: 1.1 } });
    const b = syntheticMmlu({ seed: 9, scale: 0.2, skewed: { kind: "zipf", s: 1.1 } });
    const c = syntheticMmlu({ seed: 10, scale: 0.2, skewed: { kind: "zipf", s: 1.1 } });
    expect(a.requests.map((r) => r.id)).toEqual(b.requests.map((r) => r.id));
    expect(a.meta!.hotGroups).toEqual(b.meta!.hotGroups);
    expect(c.meta!.hotGroups).not.toEqual(a.meta!.hotGroups);
    expect(a.name).toBe("synthetic-zipf");
    expect(a.meta!.schedule).toBe("zipf(s=1.1) with repeats");
    expect(a.meta!.hotGroups).toHaveLength(57);
  });

  it("rejects exponents outside (0, MAX_ZIPF_S] and non-finite ones", () => {
    for (const s of [0, -1, MAX_ZIPF_S + 0.1, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => resolveSkew({ kind: "zipf", s }), String(s)).toThrow(/zipf exponent must be in \(0, 10\]/);
      expect(() => zipfShares(10, s), String(s)).toThrow(/zipf exponent/);
    }
    expect(zipfShares(3, 1).reduce((a, b) => a + b, 0)).toBeCloseTo(1, 12);
    expect(() => zipfShares(0, 1)).toThrow(/ranks/);
  });
});
