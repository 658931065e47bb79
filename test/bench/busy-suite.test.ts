import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { BURNER, runBusy, startBurners } from "../../src/bench/busy-suite.js";
import { waitFor } from "../e2e/helpers.js";

/** Whether a process with this pid exists (signal 0 only checks). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe("test:busy", () => {
  it("runs the command each time, reports each exit code, and stops its burners", async () => {
    const lines: string[] = [];
    const dir = mkdtempSync(join(tmpdir(), "busy-suite-"));
    process.env.BUSY_MARK = join(dir, "mark");
    const codes = await runBusy({
      runs: 2,
      burners: 1,
      command: process.execPath,
      // The first run fails, the second passes: both are run and reported.
      args: [
        "-e",
        "const fs = require('node:fs'); process.exit(fs.existsSync(process.env.BUSY_MARK) ? 0 : (fs.writeFileSync(process.env.BUSY_MARK, ''), 3))",
      ],
      log: (l) => lines.push(l),
    }).finally(() => {
      delete process.env.BUSY_MARK;
      rmSync(dir, { recursive: true, force: true });
    });
    expect(codes).toEqual([3, 0]);
    expect(lines.some((l) => l.includes("run 1 FAILED (exit 3)"))).toBe(true);
    expect(lines.some((l) => l.includes("run 2 passed"))).toBe(true);
    const b = startBurners(2);
    const pids = b.pids;
    expect(pids).toHaveLength(2);
    expect(pids.every(alive)).toBe(true);
    await b.stop();
    expect(pids.some(alive)).toBe(false);
  }, 30_000);

  it("a burner leaves by itself when its parent is killed", async () => {
    const parent = spawn(
      process.execPath,
      [
        "-e",
        `const b = require("node:child_process").spawn(process.execPath, ["-e", ${JSON.stringify(BURNER)}], { stdio: ["pipe", "ignore", "inherit"] });
         process.stdout.write(String(b.pid) + "\\n"); setInterval(() => {}, 1000);`,
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    let out = "";
    parent.stdout.on("data", (d) => {
      out += String(d);
    });
    await waitFor(() => out.includes("\n"), 10_000, "the burner's pid");
    const pid = Number(out.trim());
    expect(alive(pid)).toBe(true);
    parent.kill("SIGKILL");
    await waitFor(() => !alive(pid), 10_000, "the orphaned burner to exit");
    expect(alive(pid)).toBe(false);
  }, 30_000);
});
