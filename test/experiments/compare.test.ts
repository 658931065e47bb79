import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Command } from "commander";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CliError } from "../../src/cli/errors.js";
import { registerExperiment } from "../../src/cli/experiment.js";
import { simConfigOf } from "../../src/experiments/compare/execute.js";
import {
  ADMISSION_WAIT_MS,
  COMPARED,
  closedGrid,
  DAEMON_ROW,
  OVERLOAD,
  openGrid,
} from "../../src/experiments/compare/grid.js";
import { writeCompareReport } from "../../src/experiments/compare/report.js";
import { runCompare } from "../../src/experiments/compare/run.js";

/** The grid (or the `cells` it keeps) on a tiny synthetic workload: seconds, not minutes. */
function tinyCompare(seeds: number[], extra: { cells?: RegExp } = {}) {
  return runCompare({
    source: { kind: "synthetic", scale: 0.02 },
    seeds,
    closedRequests: 24,
    openRequests: 24,
    workers: 0,
    ...extra,
  });
}

let out: string;
beforeAll(async () => {
  out = await mkdtemp(join(tmpdir(), "pm-compare-"));
});
afterAll(() => rm(out, { recursive: true, force: true }));

describe("experiment compare", () => {
  it("compares every policy, the centralized baseline and the oracle in every cell", () => {
    const runs = [...closedGrid(), ...openGrid()];
    expect(new Set(runs.map((r) => r.id)).size).toBe(runs.length);
    const cells = new Map<string, Set<string>>();
    for (const r of runs) {
      const key = r.id.replace(`-${r.policy}-`, "-*-");
      const set = cells.get(key) ?? new Set<string>();
      set.add(r.policy);
      cells.set(key, set);
    }
    for (const set of cells.values()) expect([...set].sort()).toEqual([...COMPARED].sort());
    // The axes are all there.
    expect(new Set(runs.map((r) => r.commMs))).toEqual(new Set([2, 20, 200, 1000]));
    expect(new Set(runs.map((r) => r.load))).toEqual(new Set([undefined, 0.5, 0.8, 0.95, 1.2]));
    expect(new Set(runs.map((r) => r.nodes))).toEqual(new Set([4, 16]));
    expect(new Set(runs.map((r) => r.hetero))).toEqual(new Set([false, true]));
    expect(new Set(runs.map((r) => r.memory))).toEqual(new Set(["paper", "constrained"]));
  });

  it("runs the daemon row as the daemon configures cost-aware, every other row as the core does", () => {
    for (const run of closedGrid().filter((r) => r.commMs === 2 && r.memory === "paper" && r.nodes === 4)) {
      const c = simConfigOf(run, undefined, 1, false);
      if (run.policy === DAEMON_ROW) {
        expect(c.policy).toBe("cost-aware");
        expect(c.daemonConfig).toBe(true);
      } else expect(c.daemonConfig).toBeUndefined();
    }
  });

  it("turns admission by expected wait on for the daemon row over capacity, and only there", () => {
    const runs = [...closedGrid(), ...openGrid()];
    const admitted = runs.filter((r) => r.maxWaitMs !== undefined);
    expect(admitted.length).toBeGreaterThan(0);
    for (const r of runs) {
      const on = r.policy === DAEMON_ROW && (r.load ?? 0) >= OVERLOAD;
      expect(r.maxWaitMs).toBe(on ? ADMISSION_WAIT_MS : undefined);
      const c = simConfigOf(r, undefined, 1, false);
      expect(c.node?.maxWaitMs).toBe(on ? ADMISSION_WAIT_MS : undefined);
      expect(c.keepRecords).toBe(on);
    }
  });

  it("runs the grid on a tiny synthetic workload and writes the report with its targets", async () => {
    const o = await tinyCompare([2]);
    expect(o.runs.length).toBe(closedGrid().length + openGrid().length);
    for (const { result: r } of o.runs) {
      expect(r.answered + r.refused).toBe(r.requests);
      expect(r.actualHit).toBeLessThanOrEqual(r.idealHit + 1e-9);
    }
    for (const c of o.capacities) expect(c.rate).toBeCloseTo(c.nodes / c.serviceS, 9);
    // Local never forwards, so it sends no forward and never falls back.
    for (const { run, result } of o.runs) if (run.policy === "local") expect(result.forwardedShare).toBe(0);
    // Admission runs report their admitted requests' waits; the others do not.
    for (const { run, result } of o.runs) {
      expect(result.admitted !== undefined).toBe(run.maxWaitMs !== undefined);
      if (result.admitted) expect(result.admitted.waitMaxS).toBeGreaterThanOrEqual(result.admitted.waitP99S);
    }
    const dir = join(out, "report");
    await writeCompareReport(o, { command: "test", loadBefore: 0, loadAfter: 0, cores: 2 }, dir);
    const md = await readFile(join(dir, "report.md"), "utf8");
    expect(md).toMatch(/SYNTHETIC/);
    expect(md).toMatch(/### Target 1/);
    expect(md).toMatch(/### Target 3/);
    expect(md).toMatch(/no admitted request waits past 5000 ms/);
    expect(md).toMatch(/baseline, simulation only/);
    for (const f of ["latency-vs-comm", "p99-vs-load", "hit-vs-ideal"])
      expect((await readFile(join(dir, `${f}.png`))).subarray(0, 4)).toEqual(
        Buffer.from([0x89, 0x50, 0x4e, 0x47]),
      );
  }, 120_000);

  it("runs only the cells --cells matches, without capacity runs when no open-loop run is kept", async () => {
    const cells = /^closed-(local|cost-aware)-n4-c200-constrained$/;
    const o = await tinyCompare([2, 3], { cells });
    expect(o.runs.map((r) => `${r.run.id}@${r.seed}`).sort()).toEqual([
      "closed-cost-aware-n4-c200-constrained@2",
      "closed-cost-aware-n4-c200-constrained@3",
      "closed-local-n4-c200-constrained@2",
      "closed-local-n4-c200-constrained@3",
    ]);
    expect(o.capacities).toEqual([]);
    // The report says so, rather than leaving an empty sentence (". .") where the capacities go.
    const dir = join(out, "closed-only");
    await writeCompareReport(o, { command: "test", loadBefore: 0, loadAfter: 0, cores: 2 }, dir);
    const md = await readFile(join(dir, "report.md"), "utf8");
    expect(md).not.toMatch(/\. \./);
    expect(md).toContain("no open-loop run in this selection, so capacity was not measured");
    const open = await tinyCompare([2], { cells: /^open-local-n4-c2-paper-l50$/ });
    expect(open.runs.map((r) => r.run.id)).toEqual(["open-local-n4-c2-paper-l50"]);
    expect(open.capacities.length).toBe(2);
  }, 120_000);

  it("rejects bad flags with a CliError", async () => {
    const program = new Command().exitOverride();
    program.configureOutput({ writeErr: () => {}, writeOut: () => {} });
    registerExperiment(program);
    const argv = (...a: string[]) => ["node", "prefixmesh", "experiment", "compare", ...a];
    await expect(program.parseAsync(argv("--requests", "0"))).rejects.toThrow(CliError);
    // Opt-in flags: the default is the paper's load reports and cost-aware's defaults.
    const compare = program.commands[0]?.commands.find((c) => c.name() === "compare");
    const opts = compare?.options.map((o) => o.long);
    expect(opts).toContain("--fresh-peer-load");
    expect(opts).toContain("--peer-speed");
    expect(opts).toContain("--cells");
    await expect(program.parseAsync(argv("--cells", "("))).rejects.toThrow(CliError);
    await expect(program.parseAsync(argv("--cells", "^nothing-"))).rejects.toThrow(/matches no run id/);
    await expect(program.parseAsync(argv("--mmlu-dir", join(out, "nope")))).rejects.toThrow(
      /expected dev\/ and test\//,
    );
  });
});
