/**
 * The executor's ETA (what a forward-ack carries and what admission checks against a peer's budget):
 * the whole expected run, prefill and the decode of `maxTokens`, not the prefill alone.
 */
import { describe, expect, it } from "vitest";
import { resolveNodeConfig } from "../../src/core/node/config.js";
import { Executor } from "../../src/core/node/executor.js";
import { PAPER_H100_QWEN05B } from "../../src/engines/sim/profiles.js";
import { calibrationSamples } from "../../src/sim/calibration.js";
import { prompt } from "./node-harness.js";

function calibrated(): Executor {
  const config = resolveNodeConfig({ id: "A", peers: [], capacityTokens: 100_000 });
  const ex = new Executor(config, "A", true);
  ex.calibrate(calibrationSamples(PAPER_H100_QWEN05B));
  return ex;
}

describe("the executor's ETA", () => {
  it("counts the decode of maxTokens", () => {
    const ex = calibrated();
    const msPerOutput = ex.engineCosts()?.msPerOutput;
    expect(msPerOutput).toBeGreaterThan(0);
    const tokens = prompt(1, 1, 200, 16);
    const short = ex.etaMs({ id: "s", tokens, maxTokens: 1 }, 0);
    const long = ex.etaMs({ id: "l", tokens, maxTokens: 1_001 }, 0);
    expect(long - short).toBeCloseTo(1_000 * msPerOutput!, 0);
    // A run under way: what is left of the whole run, decode included.
    expect(ex.etaMs({ id: "l", tokens, maxTokens: 1_001 }, 0, short)).toBeCloseTo(long - short, 0);
  });
});
