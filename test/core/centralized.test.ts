/**
 * The `centralized` baseline: SGLang's cache_aware rule (defaults abs 64, rel 1.5, threshold 0.3)
 * checked against a naive restatement of it, plus the edges of each branch, and that it is a
 * simulation-only baseline: the simulator gives it the oracle, the daemon's settings refuse it.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type Candidate, createPolicy, type RoutingContext } from "../../src/core/node/policies/index.js";
import { nodeSettingsSchema } from "../../src/server/settings/index.js";
import { runSimulation } from "../../src/sim/run.js";
import { smallCluster, tinyWorkload } from "../sim/helpers.js";

const ctx = (promptTokens: number): RoutingContext => ({
  promptTokens,
  now: 0,
  random: () => 0.5,
  costs: { prefillFixedMs: 10, prefillMsPerToken: 0.1, serviceMs: 100, rttPriorMs: 250, samples: 10 },
});

const cand = (i: number, self: boolean, match: number, queue: number, tree: number): Candidate => ({
  id: `n${i}`,
  self,
  estimatedMatch: match,
  estimateAgeMs: 0,
  queueDepth: queue,
  sentSinceQueue: 0,
  rttMs: self ? 0 : 2,
  capacityTokens: 10_000,
  treeTokens: tree,
});

/** The rule as SGLang states it, written the obvious way: the index of the first choice. */
function naiveFirst(cs: readonly Candidate[], prompt: number): number {
  const loads = cs.map((c) => c.queueDepth + (c.self ? 0 : (c.sentSinceQueue ?? 0)));
  const max = Math.max(...loads);
  const min = Math.min(...loads);
  const argmin = (key: (i: number) => number): number => {
    let best = -1;
    for (let i = 0; i < cs.length; i++) {
      if (best < 0) best = i;
      else {
        const d = key(i) - key(best);
        const selfWins = d === 0 && cs[i]?.self === true && cs[best]?.self !== true;
        if (d < 0 || selfWins) best = i;
      }
    }
    return best;
  };
  if (max - min > 64 && max > 1.5 * min) return argmin((i) => loads[i] as number);
  const bestMatch = argmin((i) => -(cs[i] as Candidate).estimatedMatch);
  if ((cs[bestMatch] as Candidate).estimatedMatch / prompt > 0.3) return bestMatch;
  return argmin((i) => (cs[i] as Candidate).treeTokens ?? 0);
}

describe("centralized (SGLang cache_aware rule, baseline)", () => {
  it("its first choice is the naive rule's, on random clusters", () => {
    const arb = fc
      .array(
        fc.record({
          match: fc.integer({ min: 0, max: 200 }),
          queue: fc.integer({ min: 0, max: 200 }),
          tree: fc.integer({ min: 0, max: 5_000 }),
        }),
        { minLength: 1, maxLength: 8 },
      )
      .chain((raw) =>
        fc
          .integer({ min: 0, max: raw.length - 1 })
          .map((s) => raw.map((r, i) => cand(i, i === s, r.match, r.queue, r.tree))),
      );
    fc.assert(
      fc.property(arb, fc.integer({ min: 1, max: 200 }), (cs, prompt) => {
        const order = createPolicy("centralized").rank(cs, ctx(prompt));
        expect(order[0]).toBe(naiveFirst(cs, prompt));
      }),
      { numRuns: 500 },
    );
  });

  it("balanced load: a match over 30% of the prompt wins, 30% exactly does not", () => {
    const p = createPolicy("centralized");
    const over = [cand(0, true, 0, 0, 10), cand(1, false, 31, 3, 900)];
    expect(p.rank(over, ctx(100))[0]).toBe(1);
    const at = [cand(0, true, 0, 0, 10), cand(1, false, 30, 3, 900)];
    // Not above the threshold: the smallest tree (self here) instead.
    expect(p.rank(at, ctx(100))[0]).toBe(0);
  });

  it("imbalanced only when both thresholds are crossed: then the shortest queue, whatever the match", () => {
    const p = createPolicy("centralized");
    // 70 vs 0: abs 70 > 64 and 70 > 1.5 × 0 → imbalanced.
    const imb = [cand(0, true, 0, 0, 10), cand(1, false, 100, 70, 10)];
    expect(p.rank(imb, ctx(100))[0]).toBe(0);
    // 130 vs 100: abs 30 ≤ 64 → balanced, the match wins.
    const bal = [cand(0, true, 0, 100, 10), cand(1, false, 100, 130, 10)];
    expect(p.rank(bal, ctx(100))[0]).toBe(1);
    // 300 vs 210: abs 90 > 64 but 300 ≤ 1.5 × 210 → balanced.
    const rel = [cand(0, true, 0, 210, 10), cand(1, false, 100, 300, 10)];
    expect(p.rank(rel, ctx(100))[0]).toBe(1);
  });

  it("the daemon refuses it; the simulator runs it with the oracle's global view", () => {
    expect(nodeSettingsSchema.shape.policy.safeParse("centralized").success).toBe(false);
    const w = tinyWorkload({ seed: 5, requests: 80, topics: 4, prefix: 80 });
    const r = runSimulation(smallCluster({ policy: "centralized", seed: 2, checkInvariants: true }), w);
    expect(r.invariantViolations).toEqual([]);
    expect(r.totals.answered).toBe(80);
    // With the global view it finds prefixes held elsewhere: more hits than never routing.
    const local = runSimulation(smallCluster({ policy: "local", seed: 2 }), w);
    expect(r.totals.forwardedShare).toBeGreaterThan(0);
    expect(r.totals.actualHitRate).toBeGreaterThan(local.totals.actualHitRate);
  });
});
