import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Command } from "commander";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CliError } from "../../src/cli/errors.js";
import { registerExperiment } from "../../src/cli/experiment.js";
import { simConfigFor } from "../../src/experiments/execute.js";
import { paperGrid } from "../../src/experiments/grid.js";
import { runPaperExperiment } from "../../src/experiments/paper.js";

let out: string;
beforeAll(async () => {
  out = await mkdtemp(join(tmpdir(), "pm-paper-"));
});
afterAll(() => rm(out, { recursive: true, force: true }));

const PNG_MAGIC = Buffer.from([0x89, 0x50, 0x4e, 0x47]);

describe("experiment paper grid", () => {
  it("runs its cost-aware ablation as it was measured (no eviction awareness), every other run untouched", () => {
    for (const run of paperGrid()) {
      const c = simConfigFor(run, undefined, 1);
      if (run.policy === "cost-aware") expect(c.node?.policyConfig).toEqual({ evictionAware: false });
      else expect(c.node).toBeUndefined();
    }
  });
});

describe("experiment paper (small grid, synthetic)", () => {
  it("writes report.md, results.json and every figure as SVG and PNG", async () => {
    const dir = join(out, "small");
    const res = await runPaperExperiment({
      outDir: dir,
      seed: 3,
      grid: "small",
      syntheticScale: 0.04,
      workers: 0,
    });
    expect(res.synthetic).toBe(true);
    expect(res.runs.length).toBeGreaterThanOrEqual(5);
    for (const run of res.runs) {
      expect(run.answered).toBe(run.requests);
      expect(run.incorrect).toBe(0);
      // No router beats the ideal bound.
      expect(run.actualHit).toBeLessThanOrEqual(run.idealHit + 1e-9);
    }
    const report = await readFile(join(dir, "report.md"), "utf8");
    expect(report.split("\n").slice(0, 4).join("\n")).toMatch(/SYNTHETIC/);
    for (const heading of [
      "## Table 1",
      "## Table 2",
      "## Table 3",
      "## Beyond the paper",
      "## The paper's findings",
    ]) {
      expect(report).toContain(heading);
    }
    expect(report).toContain("0.310 / "); // paper's routed latency at 2 ms beside ours
    // Every one of the paper's five findings is numbered, those whose runs the small grid skips as n/a.
    const numbered = [...report.matchAll(/^(\d)\. \*\*/gm)].map((m) => m[1]);
    expect(numbered).toEqual(["1", "2", "3", "4", "5"]);
    expect(report).toContain("4. **Slower polling lowers concentration** — n/a (runs not in this grid).");
    for (const f of ["figure2", "figure3", "figure4", "hotspots", "hitrates"]) {
      const svg = await readFile(join(dir, `${f}.svg`), "utf8");
      expect(svg.startsWith("<svg")).toBe(true);
      const png = await readFile(join(dir, `${f}.png`));
      expect(png.subarray(0, 4).equals(PNG_MAGIC)).toBe(true);
      expect(png.length).toBeGreaterThan(5_000);
      expect(report).toContain(`](${f}.png)`);
    }
    const json = JSON.parse(await readFile(join(dir, "results.json"), "utf8"));
    expect(json.synthetic).toBe(true);
    expect(json.runs.map((r: { id: string }) => r.id)).toContain("uniform-affinity-c2-p500");
    expect(json.workloads.uniform.idealHit).toBeGreaterThan(0.5);
  });

  it("is deterministic by seed", async () => {
    const a = await runPaperExperiment({
      outDir: join(out, "a"),
      seed: 5,
      grid: "small",
      syntheticScale: 0.02,
    });
    const b = await runPaperExperiment({
      outDir: join(out, "b"),
      seed: 5,
      grid: "small",
      syntheticScale: 0.02,
    });
    const strip = (r: typeof a) => r.runs.map(({ wallMs: _w, ...x }) => x);
    expect(strip(a)).toEqual(strip(b));
  });
});

describe("prefixmesh experiment paper (CLI)", () => {
  const cli = () => {
    const program = new Command().exitOverride();
    program.configureOutput({ writeErr: () => {}, writeOut: () => {} });
    registerExperiment(program);
    return program;
  };
  const argv = (...a: string[]) => ["node", "prefixmesh", "experiment", "paper", ...a];

  it("rejects bad flags with a CliError (exit 2)", async () => {
    await expect(cli().parseAsync(argv("--seed", "x"))).rejects.toThrow(CliError);
    await expect(cli().parseAsync(argv("--grid", "huge"))).rejects.toThrow(/--grid must be/);
    await expect(cli().parseAsync(argv("--mmlu-dir", join(out, "nope")))).rejects.toThrow(
      /expected dev\/ and test\//,
    );
  });

  it("runs a small synthetic grid end to end", async () => {
    const dir = join(out, "cli");
    await cli().parseAsync(
      argv("--grid", "small", "--synthetic-scale", "0.02", "--workers", "0", "--out", dir),
    );
    expect(existsSync(join(dir, "report.md"))).toBe(true);
    expect(existsSync(join(dir, "figure4.png"))).toBe(true);
  });
});

const DIST_CLI = join(__dirname, "../../dist/cli/main.js");
const haveDist = existsSync(join(__dirname, "../../dist/experiments/worker.js"));
if (!haveDist) console.warn("[skip] worker-thread grid test: dist/ not built (run `npm run build`)");

describe.skipIf(!haveDist)("compiled CLI with worker threads", () => {
  it("runs the small grid on two workers and writes the report", async () => {
    const { execFile } = await import("node:child_process");
    const dir = join(out, "threads");
    const { code, stdout } = await new Promise<{ code: number | null; stdout: string }>((resolve) => {
      const child = execFile(
        process.execPath,
        [
          DIST_CLI,
          "experiment",
          "paper",
          "--grid",
          "small",
          "--synthetic-scale",
          "0.02",
          "--workers",
          "2",
          "--out",
          dir,
        ],
        { timeout: 60_000 },
        (err, so) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout: so }),
      );
      child.stdin?.end();
    });
    expect(code).toBe(0);
    expect(stdout).toMatch(/wrote .*report\.md \(7 configurations/);
    const json = JSON.parse(await readFile(join(dir, "results.json"), "utf8"));
    expect(json.runs).toHaveLength(7);
  });
});
