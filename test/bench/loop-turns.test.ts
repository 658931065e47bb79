/** loop-turns.ts: the node's own CPU per turn, told from the GC pauses in the same turns. */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { readLoopTurns } from "../../src/bench/loop-turns.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function probeFile(lines: string[]): string {
  const dir = mkdtempSync(join(tmpdir(), "loop-turns-"));
  dirs.push(dir);
  const file = join(dir, "turns.txt");
  writeFileSync(file, `${lines.join("\n")}\n`);
  return file;
}

describe("readLoopTurns", () => {
  it("a turn with no pause in it is the node's own", () => {
    const t = readLoopTurns(
      probeFile(["12.00 0.50 100.00 113.00", "gc 200.00 230.00", "31.00 0.00 199.00 231.00"]),
      0,
    );
    expect(t).toEqual({ cpuMax: 31, cpuMaxWithoutGc: 12, gcPauseMax: 30 });
  });

  // A scavenge of a millisecond or two is common in a turn that allocates: it must not hide the
  // turn's own work, only be taken off it.
  it("a short pause in a long turn leaves the rest of the turn the node's own", () => {
    const t = readLoopTurns(probeFile(["90.00 0.00 1000.00 1091.00", "gc 1040.00 1042.00"]), 0);
    expect(t.cpuMax).toBe(90);
    expect(t.cpuMaxWithoutGc).toBeCloseTo(88, 5);
  });

  it("only the part of a pause inside the turn is taken off, overlapping pauses once", () => {
    const t = readLoopTurns(
      probeFile([
        "25.00 0.00 500.00 526.00",
        "gc 490.00 505.00", // 5 ms of it inside
        "gc 510.00 520.00",
        "gc 512.00 518.00", // within the one before: not taken off twice
      ]),
      0,
    );
    expect(t.cpuMaxWithoutGc).toBeCloseTo(10, 5);
    expect(t.gcPauseMax).toBe(15);
  });

  it("reads only what was written after `from`", () => {
    const first = "40.00 0.00 0.00 41.00\n";
    const file = probeFile([first.trim(), "7.00 0.00 50.00 58.00"]);
    expect(readLoopTurns(file, first.length)).toEqual({ cpuMax: 7, cpuMaxWithoutGc: 7, gcPauseMax: 0 });
  });
});
