/**
 * `experiment faults --classes … --loops … --set …`: only the named classes and loops run, each beside
 * its loop's fault-free run, with the given node settings in every run; the summary lists each run.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Command } from "commander";
import { afterAll, describe, expect, it } from "vitest";
import { CliError } from "../../src/cli/errors.js";
import { registerExperiment } from "../../src/cli/experiment.js";
import { runFaults, selectedClasses } from "../../src/experiments/faults/run.js";
import { faultsSubsetText } from "../../src/experiments/faults/subset.js";

let out: string | undefined;
afterAll(() => (out ? rm(out, { recursive: true, force: true }) : undefined));

describe("experiment faults: a subset", () => {
  it("runs only the named classes and loops, with the settings given", { timeout: 120_000 }, async () => {
    const o = await runFaults({
      source: { kind: "synthetic", scale: 0.05 },
      seed: 1,
      requests: 100,
      openRate: 6,
      classes: ["loss-30"],
      loops: ["open"],
      node: { pushBackByCache: false },
    });
    expect(o.runs.map((r) => `${r.classId}/${r.loop}`)).toEqual(["fault-free/open", "loss-30/open"]);
    expect(o.daemonDefaults.pushBackByCache).toBe(false);
    for (const r of o.runs) expect(r.lost).toBe(0);
    const md = faultsSubsetText(o, "cmd");
    expect(md).toContain("| loss-30 | open | 100 | 0 |");
  });

  it("refuses an unknown class, loop or setting", async () => {
    expect(() => selectedClasses(["nope"])).toThrow(/unknown fault class nope/);
    expect(selectedClasses(["fault-free", "slow-10x"]).map((c) => c.id)).toEqual(["slow-10x"]);
    out = await mkdtemp(join(tmpdir(), "pm-faults-subset-"));
    for (const bad of [
      ["--loops", "both"],
      ["--set", "noSuchSetting=1"],
      ["--set", "pushBackByCache=maybe"],
    ]) {
      const program = new Command("prefixmesh").exitOverride();
      registerExperiment(program);
      await expect(
        program.parseAsync(["experiment", "faults", "--synthetic", "--out", out, ...bad], { from: "user" }),
      ).rejects.toBeInstanceOf(CliError);
    }
  });

  it("refuses --mmlu-dir beside --synthetic, which would read none of it", async () => {
    out = await mkdtemp(join(tmpdir(), "pm-faults-subset-"));
    const program = new Command("prefixmesh").exitOverride();
    registerExperiment(program);
    await expect(
      program.parseAsync(["experiment", "faults", "--synthetic", "--mmlu-dir", out, "--out", out], {
        from: "user",
      }),
    ).rejects.toThrow(/--mmlu-dir and --synthetic: give one of them/);
  });
});
