import { spawnSync } from "node:child_process";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { CliError } from "../../src/cli/errors.js";
import { parseSeed, parseSyntheticScale, parseWorkers } from "../../src/cli/experiment-args.js";
import { requireBuild } from "../e2e/helpers.js";

describe("the flags every experiment command parses the same way", () => {
  test("--workers: min(2, cores) when not given, else a whole number in 0..64", () => {
    expect(parseWorkers(undefined)).toBe(Math.min(2, availableParallelism()));
    expect(parseWorkers("0")).toBe(0);
    expect(parseWorkers("64")).toBe(64);
    expect(() => parseWorkers("65")).toThrow(CliError);
    expect(() => parseWorkers("1.5")).toThrow(/--workers/);
  });

  test("--synthetic-scale: 0.001..10", () => {
    expect(parseSyntheticScale("0.5")).toBe(0.5);
    expect(() => parseSyntheticScale("0")).toThrow(/--synthetic-scale/);
    expect(() => parseSyntheticScale("11")).toThrow(CliError);
    expect(parseSyntheticScale(undefined, "--mmlu-dir")).toBe(1);
  });

  test("--synthetic-scale beside the real MMLU is refused at once, not silently ignored", () => {
    // The folder need not exist: the flag is refused before the data is looked for.
    const mmlu = ["--mmlu-dir", join(tmpdir(), "no-such-mmlu")];
    for (const args of [
      ["paper", ...mmlu],
      ["compare", ...mmlu],
      ["scale", ...mmlu],
      ["faults", ...mmlu],
      ["faults"],
    ]) {
      const r = spawnSync(
        process.execPath,
        [requireBuild(), "experiment", ...args, "--synthetic-scale", "2", "--out", join(tmpdir(), "pm-x")],
        { encoding: "utf8", timeout: 30_000 },
      );
      expect(r.status, args.join(" ")).toBe(2);
      expect(r.stderr).toMatch(/--synthetic-scale applies only to the synthetic workload/);
    }
  });

  test("--seed: a 32-bit unsigned integer", () => {
    expect(parseSeed("0")).toBe(0);
    expect(parseSeed(String(2 ** 32 - 1))).toBe(2 ** 32 - 1);
    expect(() => parseSeed(String(2 ** 32))).toThrow(/--seed/);
    expect(() => parseSeed("x")).toThrow(CliError);
  });
});
