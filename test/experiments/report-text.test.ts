/** What report.md claims, checked against the committed results.json it is generated from. */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { figure2, type LatencyPoint } from "../../src/experiments/figures.js";
import { PAPER_TABLE1 } from "../../src/experiments/paper-data.js";
import { writeReport } from "../../src/experiments/report.js";
import type { PaperResults, RunSummary } from "../../src/experiments/results.js";

const results = JSON.parse(
  readFileSync(new URL("../../docs/results/paper/results.json", import.meta.url), "utf8"),
) as PaperResults;
const report = writeReport(results, ["figure2"]);
const run = (id: string) => results.runs.find((r) => r.id === id) as RunSummary;
const finding = (n: number) => report.split("\n").find((l) => l.startsWith(`${n}. `)) ?? "";

describe("paper report wording", () => {
  it("says the no-route 1.00× is the profile's calibration, with arithmetic that reproduces the run", () => {
    const m =
      /lands on the paper's 0\.323 s: ([\d.]+) \+ ([\d.]+) × ([\d.]+) uncached \+ ([\d.]+) × ([\d.]+) cached \+ ([\d.]+) × 1 output token = ([\d.]+) ms per request \(measured: ([\d.]+) ms\)/.exec(
        report,
      );
    expect(report).toContain("is by construction, not a finding");
    expect(m).not.toBeNull();
    const [o, p, u, c, cached, d, sum, measured] = m!.slice(1).map(Number) as number[];
    expect(o! + p! * u! + c! * cached! + d!).toBeCloseTo(sum!, 0);
    expect(Math.abs(sum! - run("uniform-local-c2-p500").meanLatencyS * 1000)).toBeLessThan(0.2);
    expect(measured).toBeCloseTo(run("uniform-local-c2-p500").meanLatencyS * 1000, 1);
    expect(o).toBe(results.profile.overheadMs);
  });

  it("explains the Δcomm slope from the numbers: ours is one round trip per forward, the paper's needs more", () => {
    const u2 = run("uniform-affinity-c2-p500");
    const u200 = run("uniform-affinity-c200-p500");
    const ours = ((u200.meanLatencyS - u2.meanLatencyS) * 1000) / 198;
    const [p2, p200] = PAPER_TABLE1.comm;
    const paper = ((p200.routed - p2.routed) * 1000) / (p200.commMs - p2.commMs);
    const text = finding(1) + report.slice(report.indexOf("**Why the paper's Δcomm slope"));
    expect(text).toContain(`(${paper.toFixed(2)} vs our ${ours.toFixed(2)} ms per ms)`);
    // Ours: slope ÷ forwarded share = 2 one-way delays (a round trip) per forward.
    const delays = ours / ((u2.forwardedShare + u200.forwardedShare) / 2);
    expect(delays).toBeGreaterThan(1.95);
    expect(delays).toBeLessThan(2.05);
    expect(text).toContain(`Ours: ${ours.toFixed(2)} = ${delays.toFixed(2)} ×`);
    expect(text).toMatch(/gives at most 2\.00 ms per ms even if every request were forwarded/);
    expect(text).toMatch(/stays \*\*unexplained\*\*/);
    expect(finding(1)).not.toMatch(/queueing at its hotspot/);
  });

  it("calls findings 3 and 4 what they are: bracketed by the two tie rules, not reproduced", () => {
    expect(finding(3)).toMatch(/\*\*not reproduced — bracketed by the two tie rules\*\*/);
    expect(finding(3)).toContain(
      `with the literal argmax ${(run("uniform-affinity-argmax-c2-p500").hotspotShare * 100).toFixed(1)}%`,
    );
    expect(finding(4)).toMatch(/\*\*not reproduced\*\*: the fall shows only with the literal argmax/);
    expect(report).not.toMatch(/reproduced only with|reproduced with the literal argmax/);
  });
});

describe("Figure 2", () => {
  it("has one legend entry per line, each saying ours or the paper's, cost-aware included", () => {
    const points: LatencyPoint[] = [
      { commMs: 2, latencyS: 0.31, policy: "routed", source: "paper" },
      { commMs: 2, latencyS: 0.3, policy: "routed", source: "ours" },
      { commMs: 2, latencyS: 0.323, policy: "no-route", source: "paper" },
      { commMs: 2, latencyS: 0.323, policy: "no-route", source: "ours" },
      { commMs: 2, latencyS: 0.3, policy: "cost-aware", source: "ours" },
    ];
    const spec = figure2(points, "") as unknown as {
      encoding: Record<string, { field: string; scale: { domain: string[]; range: unknown[] } }>;
    };
    const { color, strokeDash, shape } = spec.encoding;
    expect(color!.scale.domain).toEqual([
      "routed — ours (simulator)",
      "routed — paper",
      "no-route — ours (simulator)",
      "no-route — paper",
      "cost-aware — ours (simulator)",
    ]);
    // Color, dash and shape share the field, so the legend is one list naming each series.
    for (const e of [strokeDash!, shape!]) {
      expect(e.field).toBe("series");
      expect(e.scale.domain).toEqual(color!.scale.domain);
    }
    expect(shape!.scale.range).toEqual(["circle", "square", "circle", "square", "circle"]);
  });
});
