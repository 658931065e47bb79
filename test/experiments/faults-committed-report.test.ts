/**
 * The committed fault report is what its writer makes of the committed results.json: wording changed
 * in src/experiments/faults/report.ts without rerunning `prefixmesh experiment faults` fails here.
 */
import { readFileSync } from "node:fs";
import { describe, expect, test } from "vitest";
import { FAULT_CLASSES } from "../../src/experiments/faults/classes.js";
import { type FaultsResults, faultsReportText } from "../../src/experiments/faults/report.js";

const dir = new URL("../../docs/results/faults/", import.meta.url);
const results = JSON.parse(readFileSync(new URL("results.json", dir), "utf8")) as FaultsResults;
const committed = readFileSync(new URL("report.md", dir), "utf8");

describe("docs/results/faults/report.md", () => {
  test("is what the report writer makes of the committed results.json (else: rerun the command)", () => {
    expect(committed).toBe(faultsReportText(results));
  });

  test("ran every class on ≥ 10,000 MMLU requests per loop, nothing lost or answered twice", () => {
    expect(results.synthetic).toBe(false);
    expect(results.context.command).toBe(
      "prefixmesh experiment faults --mmlu-dir ../shared/datasets/mmlu --out docs/results/faults",
    );
    for (const loop of ["closed", "open"])
      for (const c of FAULT_CLASSES)
        expect(results.runs.some((r) => r.classId === c.id && r.loop === loop)).toBe(true);
    for (const r of results.runs) {
      expect(r.requests, r.id).toBeGreaterThanOrEqual(10_000);
      expect(r.lost, r.id).toBe(0);
      expect(r.duplicated, r.id).toBe(0);
    }
  });
});
