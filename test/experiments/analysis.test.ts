import { describe, expect, it } from "vitest";
import {
  breakEvenMs,
  pickSubjects,
  shareWindows,
  zoneSummary,
  zones,
} from "../../src/experiments/analysis.js";
import { jitterFor, paperGrid, RUN, smallGrid } from "../../src/experiments/grid.js";

describe("share windows (Figures 3-4)", () => {
  it("slides a window over one subject's requests and matches a direct count", () => {
    // Subject "a" every other request; served node cycles with a drift.
    const groups: string[] = [];
    const served: number[] = [];
    for (let i = 0; i < 2000; i++) {
      groups.push(i % 2 === 0 ? "a" : "b");
      served.push(i < 800 ? i % 4 : i < 1400 ? 2 : (i >> 3) % 2);
    }
    const ws = shareWindows(groups, served, "a", 4, 300, 30);
    const idx = groups.flatMap((g, i) => (g === "a" ? [i] : []));
    expect(ws).toHaveLength(Math.floor((idx.length - 300) / 30) + 1);
    ws.forEach((w, k) => {
      const slice = idx.slice(k * 30, k * 30 + 300);
      expect(w.x).toBe(slice[slice.length - 1]);
      for (let n = 0; n < 4; n++) {
        expect(w.shares[n]).toBeCloseTo(slice.filter((i) => served[i] === n).length / 300, 10);
      }
    });
  });

  it("uses one window over all requests of a small subject, and skips failed requests", () => {
    const ws = shareWindows(["a", "a", "a", "b"], [1, 1, -1, 0], "a", 2);
    expect(ws).toEqual([{ x: 1, shares: [0, 1] }]);
    expect(shareWindows(["b"], [0], "a", 2)).toEqual([]);
  });
});

describe("zones of the specialization–eviction cycle", () => {
  const w = (x: number, top: number, node = 0) => ({
    x,
    shares: [0, 1, 2, 3].map((n) => (n === node ? top : (1 - top) / 3)),
  });

  it("labels competitive, then specialized, then re-dispersed windows", () => {
    const segs = zones([w(10, 0.4), w(20, 0.6), w(30, 0.95), w(40, 1), w(50, 0.5), w(60, 0.92, 2)]);
    expect(segs.map((s) => [s.zone, s.windows, s.node])).toEqual([
      ["competitive", 2, undefined],
      ["specialized", 2, 0],
      ["re-dispersed", 1, undefined],
      ["specialized", 1, 2],
    ]);
    expect(segs[1]).toMatchObject({ from: 20, to: 40 });
    expect(zoneSummary(segs)).toEqual({ competitive: 2, specialized: 3, "re-dispersed": 1, specialists: 2 });
  });

  it("a change of specialist starts a new specialized period", () => {
    const segs = zones([w(1, 0.95, 0), w(2, 0.95, 1)]);
    expect(segs).toHaveLength(2);
  });
});

describe("helpers", () => {
  it("picks subjects that are large in every workload", () => {
    const a = ["x", "x", "x", "y", "y", "z"];
    const b = ["y", "y", "y", "z", "z"];
    expect(pickSubjects([a, b], 2)).toEqual(["y", "z"]);
  });

  it("interpolates the break-even Δcomm (paper's own numbers: ~7.4 ms)", () => {
    expect(breakEvenMs(2, -0.013, 200, 0.462)).toBeCloseTo(7.42, 2);
    expect(breakEvenMs(2, 0.1, 200, 0.1)).toBeUndefined();
  });

  it("the grid has every configuration the tables name, with the paper's jitter", () => {
    const ids = new Set(paperGrid().map((r) => r.id));
    for (const id of Object.values(RUN)) expect(ids.has(id)).toBe(true);
    expect(new Set(smallGrid().map((r) => r.id)).size).toBe(smallGrid().length);
    expect(jitterFor(2)).toBe(0.5);
    expect(jitterFor(200)).toBe(5);
  });
});
