import { describe, expect, it } from "vitest";
import { overBudget, project } from "../../src/experiments/scale/budget.js";

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
});
