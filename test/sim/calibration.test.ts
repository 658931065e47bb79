/**
 * The simulator's start-up calibration (src/sim/calibration.ts): a node booting in the daemon's
 * configuration fits its costs from its own engine, slowdown included, before its first request.
 */
import { describe, expect, it } from "vitest";
import { EngineCostFit } from "../../src/core/node/engine-costs.js";
import { PROFILES } from "../../src/engines/sim/profiles.js";
import { calibrationSamples } from "../../src/sim/calibration.js";

const profile = PROFILES["paper-h100-qwen0.5b"];
const prior = { prefillFixedMs: 50, prefillMsPerToken: 0.5, weight: 2, rttMs: 250 };

function fitOf(slowdown: number) {
  const fit = new EngineCostFit(prior, 0.98);
  fit.dropPrior();
  for (const s of calibrationSamples(profile, slowdown)) fit.sample(s);
  return fit;
}

describe("simulated start-up calibration", () => {
  it("runs the daemon's shapes: long and short cold, long cached, two rounds", () => {
    const s = calibrationSamples(profile);
    expect(s).toHaveLength(6);
    expect(s.map((x) => x.cached > 0)).toEqual([false, false, true, false, false, true]);
    expect(s.every((x) => x.outputTokens > 0)).toBe(true);
  });

  it("fits the engine's profile, so the node's advertised costs are believed from its boot", () => {
    const fit = fitOf(1);
    expect(fit.measured).toBe(true);
    const c = fit.costs();
    expect(c.fixedMs).toBeCloseTo(profile.overheadMs, 1);
    expect(c.msPerUncached).toBeCloseTo(profile.prefillMsPerToken, 3);
    expect(c.msPerOutput).toBeCloseTo(profile.decodeMsPerToken, 6);
  });

  it("measures a slowed engine as slower by its factor", () => {
    const fast = fitOf(1).costs();
    const slow = fitOf(10).costs();
    expect(slow.msPerUncached / fast.msPerUncached).toBeCloseTo(10, 3);
    expect(slow.fixedMs / fast.fixedMs).toBeCloseTo(10, 3);
  });
});
