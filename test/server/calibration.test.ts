/** Start-up calibration against the sim engine, whose cost model is known exactly. */
import { describe, expect, it } from "vitest";
import { PrefixNode } from "../../src/core/node/node.js";
import { CPU_LLAMACPP, PAPER_H100_QWEN05B } from "../../src/engines/sim/profiles.js";
import { SimEngine } from "../../src/engines/sim/sim-engine.js";
import { calibrateEngine } from "../../src/server/runtime/calibration.js";

const instant = async () => {};

describe("start-up calibration", () => {
  for (const profile of [PAPER_H100_QWEN05B, CPU_LLAMACPP]) {
    it(`recovers the ${profile.name} engine's four costs and leaves its cache empty`, async () => {
      const engine = new SimEngine({ profile, sleep: instant });
      const c = await calibrateEngine(engine, { budgetMs: 60_000 });
      expect(c.stopped).toBeUndefined();
      expect(c.samples).toHaveLength(6);
      // The third run of each round reuses the first's prompt: its prefix is cached.
      expect(c.samples[2]?.cached).toBeGreaterThan(200);
      expect(c.samples[0]?.cached).toBe(0);
      expect(engine.cache.size).toBe(0);

      const node = new PrefixNode(
        { id: "a", capacityTokens: 10_000, advertiseCosts: true },
        { now: () => 0, random: () => 0.5 },
      );
      expect(node.engineCosts()).toBeUndefined();
      node.calibrate(c.samples);
      const k = node.engineCosts();
      expect(k?.fixedMs).toBeCloseTo(profile.overheadMs, 1);
      expect(k?.msPerUncached).toBeCloseTo(profile.prefillMsPerToken, 3);
      expect(k?.msPerCached).toBeCloseTo(profile.cachedMsPerToken, 2);
      expect(k?.msPerOutput).toBeCloseTo(profile.decodeMsPerToken, 6);
      // Routing's own fit takes the calibration too (no longer the 50 ms + 0.5 ms/token prior).
      expect(node.learnedCosts().prefillMsPerToken).toBeGreaterThan(1);
    });
  }

  it("is bounded: a run past the budget is aborted and the rest is skipped", async () => {
    // Real timers, 10 ms of budget, each run modelled at ≥ 99 ms.
    const engine = new SimEngine({ profile: PAPER_H100_QWEN05B });
    const t0 = performance.now();
    const c = await calibrateEngine(engine, { budgetMs: 10 });
    expect(performance.now() - t0).toBeLessThan(5_000);
    expect(c.stopped).toBe("budget");
    expect(c.samples).toHaveLength(0);
    expect(engine.cache.size).toBe(0);
  });

  it("is bounded even by an engine that ignores the abort (wedged)", async () => {
    class Wedged extends SimEngine {
      override run(): Promise<never> {
        return new Promise<never>(() => {});
      }
    }
    const c = await calibrateEngine(new Wedged({ profile: PAPER_H100_QWEN05B }), { budgetMs: 50 });
    expect(c.stopped).toBe("budget");
    expect(c.samples).toHaveLength(0);
  });

  it("off at 0 ms: no run at all", async () => {
    const engine = new SimEngine({ profile: PAPER_H100_QWEN05B, sleep: instant });
    const c = await calibrateEngine(engine, { budgetMs: 0 });
    expect(c).toEqual({ samples: [], ms: 0, stopped: "disabled" });
  });
});
