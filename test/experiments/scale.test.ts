import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hitByArrival, hitFrom, steadyWindow } from "../../src/experiments/scale/execute.js";
import { writeScaleReport } from "../../src/experiments/scale/report.js";
import { boundedBytes } from "../../src/experiments/scale/report-targets.js";
import { runScale, type ScaleOutcome } from "../../src/experiments/scale/run.js";
import type { SimRecord } from "../../src/sim/types.js";

let out: string;
let o: ScaleOutcome;
beforeAll(async () => {
  out = await mkdtemp(join(tmpdir(), "pm-scale-"));
  // The quick mode's grid (N ≤ 16) on a small synthetic workload.
  o = await runScale({
    source: { kind: "synthetic", scale: 0.05 },
    seed: 3,
    maxNodes: 16,
    arrivalS: 3,
    budgetS: 600,
    heapBudgetMb: 3000,
  });
  await writeScaleReport(o, { command: "test", loadBefore: 0, loadAfter: 0, cores: 2 }, join(out, "r"));
}, 120_000);
afterAll(() => rm(out, { recursive: true, force: true }));

const main = (mode: string, n: number) => {
  const c = o.cells.find((x) => x.kind === "main" && x.mode === mode && x.nodes === n);
  if (!c) throw new Error(`no ${mode} run at ${n} nodes`);
  return c;
};

describe("experiment scale (quick)", () => {
  it("runs every cell of the small grid: both modes, the oracle, the loss runs, the protocols alone", () => {
    expect(o.nodes).toEqual([4, 16]);
    for (const kind of ["main", "loss"])
      for (const mode of ["full", "scuttlebutt"])
        for (const n of o.nodes)
          expect(o.cells.some((c) => c.kind === kind && c.mode === mode && c.nodes === n)).toBe(true);
    for (const n of o.nodes) expect(o.cells.some((c) => c.kind === "oracle" && c.nodes === n)).toBe(true);
    expect(o.membership.map((m) => [m.nodes, m.loss])).toEqual([
      [4, 0],
      [4, 0.05],
      [16, 0],
      [16, 0.05],
    ]);
    for (const n of o.nodes)
      expect(o.cells.some((c) => c.kind === "bounded" && c.nodes === n && c.maxEstimates === 64)).toBe(true);
    expect(o.rounds.map((r) => [r.nodes, r.maxEstimates])).toEqual([
      [4, undefined],
      [4, 64],
      [16, undefined],
      [16, 64],
    ]);
    // Busy rounds: every held estimate is at most a round behind its owner, most are current.
    for (const r of o.rounds) {
      expect(r.busyBytesPerNodeRound).toBeGreaterThan(r.bytesPerNodeRound);
      expect(r.currentShare).toBeGreaterThan(0.5);
      expect(r.p100).toBeLessThanOrEqual(2 * Math.log2(r.nodes));
    }
    expect(o.skipped).toEqual([]);
  });

  it("full mesh: messages per node grow with N (2(N − 1) per second at Δpoll 500 ms); scuttlebutt's grow slower", () => {
    for (const n of o.nodes) {
      const m = main("full", n).gossipMsgsPerNodeS;
      // One node of N crashes half-way (a quarter of 4 nodes) and runs end after their last answer: under 2(N
      // − 1).
      expect(m).toBeGreaterThan(1.25 * (n - 1));
      expect(m).toBeLessThan(2.2 * (n - 1));
    }
    const growth = (mode: string, k: "gossipMsgsPerNodeS" | "membershipBytesPerNodeS") =>
      main(mode, 16)[k] / main(mode, 4)[k];
    expect(growth("scuttlebutt", "gossipMsgsPerNodeS")).toBeLessThan(growth("full", "gossipMsgsPerNodeS"));
    expect(growth("scuttlebutt", "membershipBytesPerNodeS")).toBeLessThan(
      growth("full", "membershipBytesPerNodeS"),
    );
  });

  it("every run answers every request, never beats the ideal, and tracks changes and the crash", () => {
    for (const c of o.cells) {
      expect(c.answered).toBe(c.requests);
      expect(c.hit).toBeLessThanOrEqual(c.ideal + 1e-9);
      expect(c.cpuMsPerNodeS).toBeGreaterThan(0);
      expect(c.spreads.length).toBeGreaterThan(0);
      for (const s of c.spreads) {
        if (s.p50Ms !== undefined && s.p100Ms !== undefined) expect(s.p50Ms).toBeLessThanOrEqual(s.p100Ms);
      }
    }
    // The full mesh suspects a silent peer after 3 Δpoll: every member notices within 3 Δpoll + one probe
    // step.
    for (const n of o.nodes) {
      const d = main("full", n).detection;
      expect(d?.noticed).toBe(n - 1);
      expect(d?.lastMs).toBeLessThanOrEqual(1_500 + 100);
    }
    // SWIM declares the crashed node dead everywhere, never before it suspected it.
    for (const m of o.membership) {
      expect(m.declaredDead).toBe(m.observers);
      expect(m.firstSuspectMs).toBeLessThanOrEqual(m.firstDeadMs as number);
    }
  });

  it("writes the report with its targets, tables and four figures", async () => {
    const dir = join(out, "r");
    const md = await readFile(join(dir, "report.md"), "utf8");
    expect(md).toMatch(/## Targets \(issue 14\), measured/);
    expect(md).toMatch(/SYNTHETIC/);
    for (const h of [
      "## Node simulator",
      "## Spread of one change",
      "## Detection of a crashed node",
      "## Runs not started",
    ])
      expect(md).toContain(h);
    // Every target line says met, not met or not measured.
    const lines = md
      .split("\n")
      .filter((l) => l.startsWith("- ") && md.indexOf(l) < md.indexOf("## How each"));
    expect(lines.length).toBeGreaterThan(5);
    for (const name of ["bytes-vs-n", "convergence-vs-n", "detection-vs-n", "hit-vs-n"]) {
      expect(existsSync(join(dir, `${name}.png`))).toBe(true);
      const svg = await readFile(join(dir, `${name}.svg`), "utf8");
      expect(svg).toMatch(/log scale/);
    }
    const json = JSON.parse(await readFile(join(dir, "results.json"), "utf8"));
    expect(json.cells.length).toBe(o.cells.length);
  });

  it("times the cluster's formation in both modes, within the arrivals, and reports it", async () => {
    for (const mode of ["full", "scuttlebutt"])
      for (const n of o.nodes) {
        const { formedAtMs: all, formed99AtMs: most } = main(mode, n);
        expect(most).toBeGreaterThan(0);
        expect(all).toBeGreaterThanOrEqual(most as number);
        expect(all).toBeLessThan(o.arrivalS * 1000);
      }
    const md = await readFile(join(out, "r", "report.md"), "utf8");
    expect(md).toMatch(
      /Formation: .*full 4: \d+\.\d\d \/ \d+\.\d\d s, 16: .* s; scuttlebutt 4: \d+\.\d\d \/ \d+\.\d\d s/,
    );
  });

  it("keeps every answered request's tokens by arrival, and reports the hit rate after formation", async () => {
    for (const c of o.cells) {
      const prompt = c.hitByArrival.prompt.reduce((a, b) => a + b, 0);
      const hit = c.hitByArrival.hit.reduce((a, b) => a + b, 0);
      expect(prompt).toBeGreaterThan(0);
      expect(hit / prompt).toBeCloseTo(c.hit, 9);
      expect(hitFrom(c.hitByArrival, 0)).toBeCloseTo(c.hit, 9);
    }
    const md = await readFile(join(out, "r", "report.md"), "utf8");
    expect(md).toMatch(
      /after formation \(arrivals from \d+\.\d\d s, when all three runs had formed\): oracle/,
    );
  });

  it("measures gossip bytes after membership formed beside the whole run's, and reports both with ratios", async () => {
    for (const c of o.cells.filter((x) => x.mode === "scuttlebutt")) {
      expect(c.membersFormedAtMs).toBeDefined();
      const st = c.steady;
      if (!st) throw new Error(`no steady window at ${c.nodes} nodes`);
      expect(st.fromMs).toBeGreaterThan(c.membersFormedAtMs as number);
      expect(st.toMs).toBeGreaterThan(st.fromMs);
      expect(st.gossipBytesPerNodeS).toBeGreaterThan(0);
      expect(st.membershipBytesPerNodeS).toBeLessThanOrEqual(st.gossipBytesPerNodeS);
    }
    const md = await readFile(join(out, "r", "report.md"), "utf8");
    expect(md).toMatch(
      /\*\*whole run\*\* .*: 4: \d+ B\/s, 16: \d+ B\/s — 16 vs 4 nodes \d+\.\d\d× — not decided/,
    );
    expect(md).toMatch(
      /\*\*steady state after formation\*\* .*16: \d+ B\/s \(.*\) — 16 vs 4 nodes \d+\.\d\d× — not decided/,
    );
  });

  it("takes the steady window in whole buckets after formation, up to the arrivals' end or the run's", () => {
    expect(steadyWindow(undefined, 5000, 9000, 250)).toBeUndefined();
    expect(steadyWindow(120, 5000, 9000, 250)).toEqual({ fromMs: 250, toMs: 5000, afterArrivals: false });
    // Formation outlasting the arrivals: the window runs to the end of the run instead.
    expect(steadyWindow(4900, 5000, 9100, 250)).toEqual({ fromMs: 5000, toMs: 9000, afterArrivals: true });
    expect(steadyWindow(8900, 5000, 9100, 250)).toBeUndefined();
  });

  it("gives no steady verdict from a window in the drain, and compares the largest N within the arrivals", () => {
    const cell = (nodes: number, whole: number, steady: number, afterArrivals: boolean) => ({
      ...main("scuttlebutt", 16),
      kind: "bounded" as const,
      nodes,
      gossipBytesPerNodeS: whole,
      steady: {
        fromMs: 500,
        toMs: 5000,
        gossipBytesPerNodeS: steady,
        membershipBytesPerNodeS: 1,
        afterArrivals,
      },
    });
    const lines = boundedBytes({
      ...o,
      nodes: [16, 256, 1024],
      rounds: [],
      cells: [cell(16, 1000, 1000, false), cell(256, 3000, 4000, false), cell(1024, 4000, 2000, true)],
    });
    expect(lines[0]).toMatch(/\*\*whole run\*\*.* — 1024 vs 16 nodes 4\.00× — \*\*not met\*\*/);
    expect(lines[1]).toMatch(
      /\*\*steady state after formation\*\*.* — 1024 vs 16 nodes 2\.00× — not decided \(at 1024 nodes .*drain\); measured instead: 256 vs 16 nodes 4\.00×/,
    );
  });

  it("splits the hit rate by arrival bucket", () => {
    const rec = (startMs: number, promptTokens: number, actualHitTokens: number, ok = true) =>
      ({ startMs, promptTokens, actualHitTokens, ok }) as SimRecord;
    const h = hitByArrival(
      [rec(10, 100, 0), rec(600, 100, 50), rec(620, 100, 100), rec(700, 100, 100, false)],
      250,
    );
    expect(h.prompt).toEqual([100, 0, 200]);
    expect(h.hit).toEqual([0, 0, 150]);
    expect(hitFrom(h, 0)).toBeCloseTo(150 / 300, 9);
    expect(hitFrom(h, 300)).toBeCloseTo(150 / 200, 9); // from the next whole bucket: 500 ms
    expect(hitFrom(h, 1_000)).toBeUndefined();
  });
});

describe("arrival window per N", () => {
  it("stretches small N to the minimum request count and leaves large N at arrivalS", async () => {
    const { arrivalSAt, RATE_PER_NODE } = await import("../../src/experiments/scale/grid.js");
    const o = { arrivalS: 5, minRequests: 1000 };
    expect(arrivalSAt(o, 4) * RATE_PER_NODE * 4).toBeCloseTo(1000);
    expect(arrivalSAt(o, 1024)).toBe(5);
    expect(arrivalSAt({ arrivalS: 5 }, 4)).toBe(5);
  });
});

describe("a subset of the grid (--nodes, --series)", () => {
  it("runs only the cells asked for: one N, one series, no protocols alone", async () => {
    const sub = await runScale({
      source: { kind: "synthetic", scale: 0.05 },
      seed: 3,
      maxNodes: 16,
      nodes: [16],
      series: ["oracle"],
      arrivalS: 1,
      budgetS: 600,
      heapBudgetMb: 3000,
    });
    expect(sub.nodes).toEqual([16]);
    expect(sub.cells.map((c) => [c.kind, c.nodes])).toEqual([["oracle", 16]]);
    expect(sub.membership).toEqual([]);
    expect(sub.rounds).toEqual([]);
    expect(sub.skipped).toEqual([]);
  }, 120_000);

  it("runs the bounded series with the --max-estimates asked for, and says so", async () => {
    const sub = await runScale({
      source: { kind: "synthetic", scale: 0.05 },
      seed: 3,
      maxNodes: 16,
      nodes: [16],
      series: ["bounded-scuttlebutt"],
      arrivalS: 1,
      budgetS: 600,
      heapBudgetMb: 3000,
      boundedEstimates: 4,
    });
    expect(sub.boundedEstimates).toBe(4);
    expect(sub.cells.map((c) => [c.kind, c.nodes, c.maxEstimates])).toEqual([["bounded", 16, 4]]);
    const dir = await mkdtemp(join(tmpdir(), "scale-m-"));
    try {
      await writeScaleReport(sub, { command: "test", loadBefore: 0, loadAfter: 0, cores: 2 }, dir);
      expect(await readFile(join(dir, "report.md"), "utf8")).toMatch(
        /\| scuttlebutt, --max-estimates 4 \| 16 \|/,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
