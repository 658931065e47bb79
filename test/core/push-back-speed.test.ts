/**
 * §3.2's push-back exception ("unless our own queue is deeper") compares queues in our own jobs:
 * a peer's advertised costs say how many of ours one of its jobs is worth (peer-load.ts).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { LearnedCosts } from "../../src/core/node/cost-model.js";
import { cacheSavedJobs, queueWeight, shorterQueue } from "../../src/core/node/peer-load.js";
import type { EngineCosts } from "../../src/core/snapshot.js";

const fast: EngineCosts = { fixedMs: 99, msPerUncached: 2.03, msPerCached: 0.01, msPerOutput: 5 };
const times = (c: EngineCosts, f: number): EngineCosts => ({
  fixedMs: c.fixedMs * f,
  msPerUncached: c.msPerUncached * f,
  msPerCached: c.msPerCached * f,
  msPerOutput: c.msPerOutput * f,
});
const slow = times(fast, 10);

describe("push-back measured in our jobs", () => {
  it("compares by count while either side's costs are unknown (the paper's rule)", () => {
    expect(queueWeight(undefined, fast)).toBe(1);
    expect(queueWeight(fast, undefined)).toBe(1);
    expect(shorterQueue({ queueDepth: 3, costs: undefined }, 4, fast)).toBe(true);
    expect(shorterQueue({ queueDepth: 4, costs: undefined }, 4, fast)).toBe(false);
  });

  it("lets a 10x slower node route to a fast peer pushing back with a longer queue", () => {
    expect(queueWeight(fast, slow)).toBeCloseTo(0.1, 6);
    expect(shorterQueue({ queueDepth: 12, costs: fast }, 13, slow)).toBe(true);
    // …but not one whose queue is worth more than ours even so.
    expect(shorterQueue({ queueDepth: 140, costs: fast }, 13, slow)).toBe(false);
  });

  it("keeps a fast node off a slow peer pushing back with a shorter queue", () => {
    expect(queueWeight(slow, fast)).toBeCloseTo(10, 6);
    expect(shorterQueue({ queueDepth: 2, costs: slow }, 12, fast)).toBe(false);
    expect(shorterQueue({ queueDepth: 1, costs: slow }, 12, fast)).toBe(true);
  });

  it("a weight is within [1/10, 10] and equal machines weigh 1", () => {
    fc.assert(
      fc.property(fc.double({ min: 0.001, max: 1000, noNaN: true }), (f) => {
        const w = queueWeight(times(fast, f), fast);
        expect(w).toBeGreaterThanOrEqual(0.1 - 1e-12);
        expect(w).toBeLessThanOrEqual(10 + 1e-12);
      }),
    );
    expect(queueWeight(fast, fast)).toBe(1);
  });

  it("with pushBackByCache counts what the peer's cache saves the request on our side", () => {
    const k: LearnedCosts = {
      prefillFixedMs: 99,
      prefillMsPerToken: 2,
      serviceMs: 400,
      rttPriorMs: 2,
      samples: 50,
    };
    // 600 cached tokens there, none here: 1,200 ms of prefill saved, three of our service times.
    const saved = cacheSavedJobs({ estimatedMatch: 600 }, { match: 0 }, k);
    expect(saved).toBeCloseTo(3, 9);
    expect(shorterQueue({ queueDepth: 14, costs: undefined }, 12, fast)).toBe(false);
    expect(shorterQueue({ queueDepth: 14, costs: undefined }, 12, fast, saved)).toBe(true);
    expect(shorterQueue({ queueDepth: 15, costs: undefined }, 12, fast, saved)).toBe(false);
    // Nothing saved when we hold as much, or before a service time is known.
    expect(cacheSavedJobs({ estimatedMatch: 600 }, { match: 600 }, k)).toBe(0);
    expect(cacheSavedJobs({ estimatedMatch: 600 }, { match: 0 }, { ...k, serviceMs: 0 })).toBe(0);
  });
});
