/** Chat follow-ups in the simulator: sent only after the turn they follow is answered (open loop). */
import { describe, expect, it } from "vitest";
import { DEFAULT_PROFILE } from "../../src/engines/sim/profiles.js";
import { runSimulation } from "../../src/sim/run.js";
import type { SimConfig } from "../../src/sim/types.js";
import { parseTurns } from "../../src/workload/chat-turns.js";
import { syntheticChat } from "../../src/workload/synthetic.js";
import type { Workload } from "../../src/workload/types.js";

const config: SimConfig = {
  nodes: 4,
  policy: "affinity",
  commMs: 2,
  jitterMs: 0.5,
  pollMs: 500,
  profile: DEFAULT_PROFILE,
  seed: 1,
  keepRecords: true,
};

const chat = (extra: Partial<Parameters<typeof syntheticChat>[0]> = {}) =>
  syntheticChat({ seed: 2, scale: 0.2, conversations: 150, turns: parseTurns("2-6"), ...extra });

describe("chat workloads in the simulator", () => {
  it("open loop: a follow-up is submitted its think time after the turn it follows is answered", () => {
    // A high rate and short think times, so follow-ups would often overtake a fixed schedule.
    const w = chat({ openLoopRate: 20, thinkMs: 50 });
    const r = runSimulation(config, w);
    expect(r.totals.answered).toBe(w.requests.length);
    expect(r.totals.incorrect).toBe(0);
    const rec = new Map(r.records.map((x) => [x.index, x]));
    let followUps = 0;
    w.requests.forEach((q, i) => {
      const mine = rec.get(i)!;
      if (!q.after) {
        expect(mine.startMs).toBeCloseTo(q.arrivalMs!, 6);
        return;
      }
      followUps++;
      const prev = rec.get(q.after.request)!;
      expect(mine.startMs).toBeCloseTo(prev.endMs + q.after.thinkMs, 6);
    });
    expect(followUps).toBe(w.requests.length - 150);
  });

  it("closed loop: one request at a time in list order, each turn after the one it follows", () => {
    const w = chat();
    const r = runSimulation(config, w);
    expect(r.totals.answered).toBe(w.requests.length);
    const byIndex = [...r.records].sort((a, b) => a.index - b.index);
    for (let i = 1; i < byIndex.length; i++)
      expect(byIndex[i]!.startMs).toBeGreaterThanOrEqual(byIndex[i - 1]!.endMs);
  });

  it("routing finds the history: affinity hits more than local when turns enter nodes round-robin", () => {
    const w = chat({ conversations: 300 });
    const local = runSimulation({ ...config, policy: "local" }, w);
    const routed = runSimulation(config, w);
    expect(routed.totals.actualHitRate).toBeGreaterThan(local.totals.actualHitRate + 0.05);
  });

  it("rejects a follow-up that points at a later request or has a negative think time", () => {
    const w = chat({ openLoopRate: 5 });
    const bad = (edit: (x: Workload) => void) => {
      const copy: Workload = { ...w, requests: w.requests.map((q) => ({ ...q })) };
      edit(copy);
      return () => runSimulation(config, copy);
    };
    const j = w.requests.findIndex((q) => q.after);
    expect(
      bad((x) => {
        x.requests[j]!.after = { request: j + 1, thinkMs: 0 };
      }),
    ).toThrow(/not an earlier one/);
    expect(
      bad((x) => {
        x.requests[j]!.after = { request: 0, thinkMs: -1 };
      }),
    ).toThrow(/think time must be ≥ 0/);
  });
});
