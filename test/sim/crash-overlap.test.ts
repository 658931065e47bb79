/** Crashes of one node must follow each other: one while it is down would be ignored by the run. */
import { describe, expect, it } from "vitest";
import { runSimulation } from "../../src/sim/run.js";
import type { SimConfig, SimCrash } from "../../src/sim/types.js";
import { smallCluster, tinyWorkload } from "./helpers.js";

const base: SimConfig = smallCluster();
const withCrashes = (crashes: SimCrash[]): SimConfig => ({ ...base, faults: { node: { crashes } } });

describe("two crashes of one node", () => {
  it("are refused when the second falls while the node is still down, in either order", () => {
    const w = tinyWorkload({ seed: 1, requests: 5 });
    const overlapping: SimCrash[][] = [
      [
        { node: 1, atMs: 100, restartAtMs: 500 },
        { node: 1, atMs: 200, restartAtMs: 600 },
      ],
      [
        { node: 1, atMs: 500, restartAtMs: 600 },
        { node: 1, atMs: 100, restartAtMs: 500 },
      ],
      [
        { node: 1, atMs: 100 },
        { node: 1, atMs: 200 },
      ],
      [
        { node: 1, atMs: 300 },
        { node: 1, atMs: 100, restartAtMs: 500 },
      ],
    ];
    for (const crashes of overlapping)
      expect(() => runSimulation(withCrashes(crashes), w), JSON.stringify(crashes)).toThrow(
        /node 1 crashes at \d+ ms while still down/,
      );
  });

  it("run both when the second follows the restart, and other nodes' windows may overlap", () => {
    const w = tinyWorkload({ seed: 1, requests: 40 });
    const r = runSimulation(
      withCrashes([
        { node: 1, atMs: 4_000, restartAtMs: 5_000 },
        { node: 2, atMs: 4_500, restartAtMs: 6_000 },
        { node: 1, atMs: 7_000, restartAtMs: 8_000 },
      ]),
      w,
    );
    expect(r.perNode.map((n) => n.crashes)).toEqual([0, 2, 1, 0]);
    expect(r.totals.answered).toBe(40);
  });
});
