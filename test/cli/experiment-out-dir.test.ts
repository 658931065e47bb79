/** An experiment's --out that cannot be made fails before the run, not with a hang after it. */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { requireBuild } from "../e2e/helpers.js";

// The cheapest run of each experiment: without the check each would run, then hang making --out.
const EXPERIMENTS: string[][] = [
  ["paper", "--grid", "small"],
  ["compare", "--requests", "10", "--open-requests", "10", "--cells", "^closed-local-n4-"],
  ["faults", "--synthetic", "--classes", "fault-free", "--loops", "closed", "--requests", "50"],
  ["scale", "--quick", "--nodes", "4", "--series", "oracle"],
];

const scratch = mkdtempSync(join(tmpdir(), "pm-exp-out-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const run = (args: string[], out: string) =>
  spawnSync(process.execPath, [requireBuild(), "experiment", ...args, "--out", out], {
    cwd: scratch,
    encoding: "utf8",
    timeout: 30_000,
  });

describe("experiment --out that cannot be made", () => {
  it("exits 2 at once naming the folder, under /proc (where recursive mkdir hangs)", () => {
    const out = "/proc/prefixmesh-no-such-out";
    for (const args of EXPERIMENTS) {
      const t0 = Date.now();
      const r = run(args, out);
      expect(r.status, `${args[0]}: ${r.stderr}`).toBe(2);
      expect(r.stderr).toContain(`--out: cannot create directory ${out}: this file system does not allow it`);
      expect(r.stderr).not.toMatch(/\n\s+at /);
      // No run before the failure: a prompt exit, and nothing written.
      expect(r.stderr, args[0]).not.toMatch(/prefixmesh: .*…/);
      expect(r.stdout).toBe("");
      expect(Date.now() - t0, args[0]).toBeLessThan(20_000);
    }
  }, 150_000);

  it("exits 2 naming the folder when a parent is a file", () => {
    const file = join(scratch, "a-file");
    writeFileSync(file, "x");
    const r = run(EXPERIMENTS[2] ?? [], join(file, "sub"));
    expect(r.status, r.stderr).toBe(2);
    expect(r.stderr).toContain(`cannot create directory ${join(file, "sub")}: a parent is a file`);
  }, 60_000);
});
