import { describe, expect, it } from "vitest";
import {
  cpuSkipReason,
  overBudget,
  overCpuBudget,
  project,
  type RunCost,
} from "../../src/experiments/scale/budget.js";

describe("scale grid budget rule", () => {
  it("projects a run's cost from the last two N (quadratic growth → ×16 at 4× N)", () => {
    const p = project(
      [
        { n: 64, v: 1 },
        { n: 256, v: 16 },
      ],
      1024,
    );
    expect(p.exponent).toBeCloseTo(2, 9);
    expect(p.value).toBeCloseTo(256, 6);
    // Unknown growth: assume N².
    expect(project([{ n: 16, v: 2 }], 64).value).toBeCloseTo(32, 9);
  });

  it("starts a series' first run, skips a run projected past the budget and scales by the window", () => {
    expect(overBudget([], 1024, 1)).toBeUndefined();
    const pts = [
      { n: 64, v: 1 },
      { n: 256, v: 16 },
    ];
    expect(overBudget(pts, 1024, 300)).toBeUndefined();
    const over = overBudget(pts, 1024, 200);
    expect(over?.projected).toBeCloseTo(256, 6);
    expect(over?.last).toEqual({ n: 256, v: 16 });
    // A window twice the points' base doubles the projection.
    expect(overBudget(pts, 1024, 300, 2)?.projected).toBeCloseTo(512, 6);
  });

  it("decides on CPU time alone: the same CPU figures give the same runs whatever the wall times", () => {
    // A series' CPU seconds per base window at 16, 64 and 256 nodes (growth N^2 from 64 to 256).
    const cpu = [
      { n: 16, cpuS: 0.5 },
      { n: 64, cpuS: 2 },
      { n: 256, cpuS: 32 },
    ];
    // A quiet machine (wall ≈ CPU) and one shared with other jobs (wall up to 6× CPU, unevenly).
    const quiet: RunCost[] = cpu.map((p) => ({ ...p, wallS: p.cpuS * 1.02 }));
    const busy: RunCost[] = cpu.map((p, i) => ({ ...p, wallS: p.cpuS * [1.5, 2.5, 6][i]! }));
    const decisions = (pts: RunCost[], budget: number, scale: number) =>
      [64, 256, 1024].map((n, i) => {
        const over = overCpuBudget(pts.slice(0, i + 1), n, budget, scale);
        return over === undefined ? "run" : `skip ${over.projected.toFixed(3)}`;
      });
    for (const budget of [100, 300, 600, 900])
      for (const scale of [1, 2])
        expect(decisions(busy, budget, scale)).toEqual(decisions(quiet, budget, scale));
    expect(decisions(busy, 300, 1)).toEqual(["run", "run", "skip 512.000"]);
    // The 1,024-node run: CPU projects 32 × 4² = 512 s, under a 900 s budget on either machine,
    // while the busy machine's wall times project it far past that (what made the skip load-dependent).
    expect(overCpuBudget(busy, 1024, 900)).toBeUndefined();
    const wallOnly = overBudget(
      busy.map((p) => ({ n: p.n, v: p.wallS })),
      1024,
      900,
    );
    expect(wallOnly).toBeDefined();
    // Past the budget both skip it, and the reason says what the budget counts, with the wall beside.
    const over = overCpuBudget(busy, 1024, 300);
    expect(over?.projected).toBeCloseTo(512, 6);
    expect(over?.lastWallS).toBeCloseTo(192, 6);
    expect(overCpuBudget(quiet, 1024, 300)?.projected).toBeCloseTo(512, 6);
    expect(cpuSkipReason(over!, 300, " per 5 s of arrivals")).toBe(
      "projected 512 s CPU > budget 300 s CPU (measured 32.0 s CPU, 192.0 s wall per 5 s of arrivals at 256 nodes, growth ∝ N^2.00)",
    );
  });
});
