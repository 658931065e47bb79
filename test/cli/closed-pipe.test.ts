/** `prefixmesh sim … | head`: the reader closes the pipe early; the command still ends cleanly. */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { requireBuild } from "../e2e/helpers.js";

let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("a closed stdout", () => {
  it("neither crashes with an EPIPE stack nor loses the --json file", async () => {
    dir = mkdtempSync(join(tmpdir(), "pm-pipe-"));
    const json = join(dir, "r.json");
    const child = spawn(process.execPath, [requireBuild(), "sim", "--requests", "5", "--json", json], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    // Like `| head -0`: the reader is gone before the summary is written.
    child.stdout.destroy();
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString();
    });
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
    expect(stderr).not.toMatch(/EPIPE|\n\s+at /);
    expect(code).toBe(0);
    expect(existsSync(json)).toBe(true);
    expect(JSON.parse(readFileSync(json, "utf8")).totals.answered).toBe(5);
  }, 60_000);
});
