/** The paper report's findings: each of the five is numbered even when the grid ran none of its runs. */
import { describe, expect, it } from "vitest";
import { findings } from "../../src/experiments/report/findings.js";
import type { PaperResults } from "../../src/experiments/results.js";

describe("findings on a grid without their runs", () => {
  it("lists all five, each n/a, none dropped", () => {
    // Only what findings reads when no run is there: the node count and an empty Figure 4.
    const r = { nodes: 4, figure4: { panels: [], subjects: [] } } as unknown as PaperResults;
    const lines = findings(r, () => undefined);
    expect(lines.map((l) => l.slice(0, 2))).toEqual(["1.", "2.", "3.", "4.", "5."]);
    for (const l of lines) expect(l).toMatch(/ — n\/a \(runs not in this grid\)\.$/);
  });
});
