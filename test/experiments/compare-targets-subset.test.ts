/** The compare report's verdicts on a `--cells` subset: a target no cell measures is not called met. */
import { describe, expect, it } from "vitest";
import type { CompareResult } from "../../src/experiments/compare/execute.js";
import { type CompareRun, DAEMON_ROW } from "../../src/experiments/compare/grid.js";
import { targets } from "../../src/experiments/compare/targets.js";

function row(policy: CompareRun["policy"], meanS: number) {
  const run: CompareRun = {
    id: `closed-${policy}-n4-c2-paper`,
    slice: "closed",
    policy,
    nodes: 4,
    commMs: 2,
    memory: "paper",
    hetero: false,
  };
  const result = { id: run.id, meanS, actualHit: 0.5, hotspotShare: 0.3 } as CompareResult;
  return { run, result };
}

const overallLines = (rows: ReturnType<typeof row>[]) =>
  targets(rows, [rows], [1]).filter((l) => l.startsWith("Overall"));

describe("compare's targets over a subset of the grid", () => {
  it("says not measured, not met, when no cell has the runs a target compares", () => {
    const rows = [row("local", 1), row("affinity", 0.9)];
    const lines = overallLines(rows);
    expect(lines).toHaveLength(4);
    const bound = targets(rows, [rows], [1]).find((l) => l.startsWith("The oracle's p99"));
    expect(bound).toMatch(/: not measured \(no such cell here\)\.$/);
    for (const l of lines) {
      expect(l).toContain("not measured");
      expect(l).not.toMatch(/ met[;.]/);
    }
  });

  it("still gives a verdict where a cell has them", () => {
    const cell = ["local", "affinity", "oracle", "cost-aware", DAEMON_ROW, "centralized"].map((p) =>
      row(p as CompareRun["policy"], 1),
    );
    const [t1, t2] = overallLines(cell);
    expect(t1).toBe(`Overall: cost-aware met; ${DAEMON_ROW} met.`);
    expect(t2).toBe(`Overall: cost-aware met; ${DAEMON_ROW} met.`);
  });
});
