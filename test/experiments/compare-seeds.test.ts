import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Command } from "commander";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CliError } from "../../src/cli/errors.js";
import { registerExperiment } from "../../src/cli/experiment.js";
import type { CompareResult } from "../../src/experiments/compare/execute.js";
import { closedGrid, openGrid } from "../../src/experiments/compare/grid.js";
import { writeCompareReport } from "../../src/experiments/compare/report.js";
import { runCompare } from "../../src/experiments/compare/run.js";
import { meanResult, meanRows, parseSeeds } from "../../src/experiments/compare/seeds.js";

let out: string;
beforeAll(async () => {
  out = await mkdtemp(join(tmpdir(), "pm-compare-seeds-"));
});
afterAll(() => rm(out, { recursive: true, force: true }));

const result = (meanS: number, hit: number): CompareResult => ({
  id: "r",
  requests: 10,
  answered: 10,
  refused: 0,
  meanS,
  p50S: meanS,
  p99S: meanS,
  actualHit: hit,
  idealHit: 1,
  hotspotShare: 0.25,
  forwardedShare: 0,
  fallbacks: 0,
  gossipBytes: 0,
  wallMs: 1,
});

describe("experiment compare --seeds", () => {
  it("parses a seed list and refuses bad ones", () => {
    expect(parseSeeds("1,2, 3")).toEqual([1, 2, 3]);
    expect(parseSeeds("7")).toEqual([7]);
    for (const bad of ["", "1,,2", "1,1", "-1", "1.5", "a"]) expect(typeof parseSeeds(bad)).toBe("string");
  });

  it("averages every figure of a run over its seeds", () => {
    const m = meanResult([result(1, 0.5), result(2, 0.7)]);
    expect(m.meanS).toBeCloseTo(1.5, 12);
    expect(m.actualHit).toBeCloseTo(0.6, 12);
    const run = closedGrid()[0]!;
    const rows = meanRows([
      { seed: 1, run, result: result(1, 0.5) },
      { seed: 2, run, result: result(3, 0.5) },
    ]);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.result.meanS).toBeCloseTo(2, 12);
  });

  it("runs every run once per seed and reports the mean with each seed's spread", async () => {
    const o = await runCompare({
      source: { kind: "synthetic", scale: 0.02 },
      seeds: [3, 4],
      closedRequests: 16,
      openRequests: 16,
      workers: 0,
    });
    const grid = closedGrid().length + openGrid().length;
    expect(o.runs).toHaveLength(2 * grid);
    for (const s of [3, 4]) expect(o.runs.filter((r) => r.seed === s)).toHaveLength(grid);
    expect(o.capacities.map((c) => c.seed).sort()).toEqual([3, 3, 4, 4]);
    // Different seeds, different schedules: not the same run twice.
    const meanOf = (seed: number) => o.runs.filter((r) => r.seed === seed).map((r) => r.result.meanS);
    expect(meanOf(3)).not.toEqual(meanOf(4));
    const dir = join(out, "report");
    await writeCompareReport(o, { command: "test", loadBefore: 0, loadAfter: 0, cores: 2 }, dir);
    const md = await readFile(join(dir, "report.md"), "utf8");
    expect(md).toMatch(/same seeds \(3, 4;/);
    expect(md).toMatch(/Verdict: met when both ratios of the means are ≤ 1\.02/);
    // Target 1's rows carry each ratio's per-seed range and the seeds meeting the bound alone.
    expect(md).toMatch(/\| \d\.\d{3} \(\d\.\d{3}–\d\.\d{3}\) \|/);
    expect(md).toMatch(/met, [0-2]\/2 \|/);
    const json = JSON.parse(await readFile(join(dir, "results.json"), "utf8"));
    expect(json.seeds).toEqual([3, 4]);
    expect(json.runs).toHaveLength(2 * grid);
  }, 240_000);

  it("takes --seed or --seeds, not both", async () => {
    const program = new Command().exitOverride();
    program.configureOutput({ writeErr: () => {}, writeOut: () => {} });
    registerExperiment(program);
    const argv = (...a: string[]) => ["node", "prefixmesh", "experiment", "compare", ...a];
    await expect(program.parseAsync(argv("--seed", "1", "--seeds", "1,2"))).rejects.toThrow(CliError);
    await expect(program.parseAsync(argv("--seeds", "1,1"))).rejects.toThrow(/seeds repeat/);
  });
});
