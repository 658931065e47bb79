/** The compare report's check of where targets 1 and 2 conflict, on hand-made cells. */
import { describe, expect, it } from "vitest";
import { cheapestMix, conflictSection } from "../../src/experiments/compare/conflict.js";
import type { CompareResult } from "../../src/experiments/compare/execute.js";
import type { CompareRun } from "../../src/experiments/compare/grid.js";

function row(policy: CompareRun["policy"], meanS: number, hit: number, commMs = 1000) {
  const run: CompareRun = {
    id: `closed-${policy}-n4-c${commMs}-paper`,
    slice: "closed",
    policy,
    nodes: 4,
    commMs,
    memory: "paper",
    hetero: false,
  };
  const result = { id: run.id, meanS, actualHit: hit } as CompareResult;
  return { run, result };
}

describe("targets 1 and 2 against each other", () => {
  it("the cheapest mix reaching the hit target, interpolated between two measured runs", () => {
    const ca = row("cost-aware", 0.4, 0.7).result;
    const donors = [row("affinity", 1.6, 0.9), row("centralized", 1.2, 0.8)];
    // Centralized reaches 0.76 with λ = 0.6 (0.4 + 0.6 × 0.8 = 0.88 s); affinity with λ = 0.3 (0.76 s).
    const m = cheapestMix(ca, donors, 0.76);
    expect(m?.donor).toBe("affinity");
    expect(m?.share).toBeCloseTo(0.3, 9);
    expect(m?.meanS).toBeCloseTo(0.76, 9);
    // Nobody reaches 0.95: no mix.
    expect(cheapestMix(ca, donors, 0.95)).toBeUndefined();
  });

  it("calls a cell a conflict only when reaching the hit target costs more than target 1 allows", () => {
    const label = (r: CompareRun) => `c${r.commMs}`;
    // Long Δcomm: the hits cost a round trip each, far above the bound.
    const far = [
      row("cost-aware", 0.43, 0.77),
      row("oracle", 0.43, 0.77),
      row("local", 0.43, 0.77),
      row("affinity", 1.79, 0.834),
      row("centralized", 1.85, 0.834),
    ];
    // Cost-aware misses the hit rate but a mix with affinity would meet both targets.
    const near = [
      row("cost-aware", 0.76, 0.65, 200),
      row("oracle", 0.75, 0.67, 200),
      row("local", 1.02, 0.34, 200),
      row("affinity", 0.745, 0.713, 200),
      row("centralized", 0.753, 0.715, 200),
    ];
    // A cell cost-aware meets is not listed.
    const met = [
      row("cost-aware", 0.34, 0.833, 2),
      row("oracle", 0.34, 0.835, 2),
      row("local", 0.43, 0.77, 2),
      row("affinity", 0.342, 0.834, 2),
      row("centralized", 0.342, 0.834, 2),
    ];
    const md = conflictSection([far, near, met], label).join("\n");
    expect(md).toMatch(/\| c1000 \|.*\*\*conflict\*\*/);
    expect(md).toMatch(/\| c200 \|.*no conflict/);
    expect(md).not.toMatch(/\| c2 \|/);
    expect(md).toMatch(/1 of 2 such cells are a conflict/);
    expect(conflictSection([met], label)).toEqual([]);
  });
});
