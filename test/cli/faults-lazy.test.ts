/**
 * `experiment faults` loads its run and its report lazily (cli/experiment-faults.ts), as `compare` and
 * `scale` do: the report's drawing (vega, resvg: a native binary) must load before the run, so a
 * platform that cannot load it fails in a second, not after a run of many minutes.
 */
import { Command } from "commander";
import { describe, expect, it, vi } from "vitest";
import { registerExperimentFaults } from "../../src/cli/experiment-faults.js";

const ran = vi.hoisted(() => ({ count: 0 }));

vi.mock("../../src/experiments/faults/run.js", () => ({
  runFaults: async () => {
    ran.count++;
    return { runs: [], wallMs: 0, synthetic: true };
  },
}));
vi.mock("../../src/experiments/faults/report.js", () => {
  throw new Error("resvg: no binary for this platform");
});

describe("experiment faults", () => {
  it("fails on a report that cannot load before it runs anything", async () => {
    const program = new Command().exitOverride();
    registerExperimentFaults(program.command("experiment"));
    await expect(
      program.parseAsync(["experiment", "faults", "--synthetic", "--out", "/tmp/faults-lazy-unused"], {
        from: "user",
      }),
    ).rejects.toThrow(/resvg|mock/);
    expect(ran.count).toBe(0);
  });
});
