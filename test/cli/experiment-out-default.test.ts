/** `experiment faults` and `scale` without --out: never into docs/results, whose reports are committed. */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { requireBuild } from "../e2e/helpers.js";

// In a fresh folder as the working directory: where the default --out lands, harmlessly.
const runIn = (cwd: string, ...args: string[]) =>
  spawnSync(process.execPath, [requireBuild(), "experiment", ...args], {
    cwd,
    encoding: "utf8",
    timeout: 60_000,
  });

describe("the experiments' default output folder", () => {
  it("is out/<name> for faults and scale, as for paper and compare", () => {
    const cwd = mkdtempSync(join(tmpdir(), "exp-out-"));
    const faults = runIn(
      cwd,
      "faults",
      "--synthetic",
      "--classes",
      "fault-free",
      "--loops",
      "closed",
      "--requests",
      "50",
    );
    expect(faults.status, faults.stderr).toBe(0);
    const scale = runIn(cwd, "scale", "--quick", "--nodes", "4", "--series", "oracle");
    expect(scale.status, scale.stderr).toBe(0);
    expect(existsSync(join(cwd, "out/faults/summary.md"))).toBe(true);
    expect(existsSync(join(cwd, "out/scale/report.md"))).toBe(true);
    expect(existsSync(join(cwd, "docs"))).toBe(false);
  });
});
