/** `experiment faults --classes` with an unknown class is refused before any workload is built. */
import { describe, expect, it } from "vitest";
import { runFaults } from "../../src/experiments/faults/run.js";

describe("faults: an unknown --classes id", () => {
  it("is refused before the workloads are built, naming the known ids", async () => {
    const phases: string[] = [];
    const run = runFaults({
      source: { kind: "mmlu", dir: "/nonexistent-mmlu-dir" },
      seed: 1,
      requests: 10,
      openRate: 6,
      classes: ["slow-10x", "no-such-class"],
      onPhase: (p) => phases.push(p),
    });
    await expect(run).rejects.toThrow(/unknown fault class no-such-class: one of .*slow-10x/);
    expect(phases).toEqual([]);
  });
});
