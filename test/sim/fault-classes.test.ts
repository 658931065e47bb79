/**
 * The fault classes beyond the network's (fixed seeds): slow engines, frozen nodes, and the daemon's
 * node configuration, each against a run without it.
 */
import { describe, expect, it } from "vitest";
import { DAEMON_NODE_DEFAULTS } from "../../src/core/node/config.js";
import { runSimulation } from "../../src/sim/run.js";
import type { SimConfig, SimFaults, SimResult } from "../../src/sim/types.js";
import { smallCluster, tinyWorkload } from "./helpers.js";

const workload = tinyWorkload({ seed: 5, requests: 400, topics: 12, prefix: 400, suffix: 20 });
const base: SimConfig = smallCluster({ capacityTokens: 2_000, checkInvariants: true, settleMs: 1_000 });
const run = (faults: SimFaults | undefined, over: Partial<SimConfig> = {}): SimResult =>
  runSimulation({ ...base, ...(faults ? { faults } : {}), ...over }, workload);

function expectAllAnsweredOnce(r: SimResult): void {
  expect(r.invariantViolations).toEqual([]);
  expect(r.totals.answered).toBe(workload.requests.length);
  expect(r.totals.incorrect).toBe(0);
  expect(r.totals.duplicateReplies).toBe(0);
}

describe("engine faults: a slow engine", () => {
  it("takes factor × the modelled time, only for runs started in its window, and reports it", () => {
    // Local policy: the same requests meet the same caches either way, so times compare one to one.
    const local = { policy: "local" } as const;
    const plain = run(undefined, local);
    const slow = run({ engine: { slowdowns: [{ node: 1, factor: 4 }] } }, local);
    const window = run(
      { engine: { slowdowns: [{ node: 1, factor: 4, atMs: 10_000, untilMs: 20_000 }] } },
      local,
    );
    expectAllAnsweredOnce(slow);
    expectAllAnsweredOnce(window);
    const byId = new Map(plain.records.map((x) => [x.id, x]));
    let inWindow = 0;
    let outside = 0;
    for (const x of slow.records) {
      const p = byId.get(x.id);
      expect(p?.served).toBe(x.served);
      const f = x.served === 1 ? 4 : 1;
      expect(x.prefillMs).toBeCloseTo((p?.prefillMs ?? 0) * f, 6);
      expect(x.decodeMs).toBeCloseTo((p?.decodeMs ?? 0) * f, 6);
    }
    for (const x of window.records) {
      if (x.served !== 1) continue;
      const p = byId.get(x.id);
      // A run starts once the request is queued and the engine is free: after its start.
      const started = x.endMs - x.prefillMs - x.decodeMs;
      const slowed = started >= 10_000 && started < 20_000;
      if (slowed) inWindow++;
      else outside++;
      expect(x.prefillMs).toBeCloseTo((p?.prefillMs ?? 0) * (slowed ? 4 : 1), 6);
    }
    expect(inWindow).toBeGreaterThan(0);
    expect(outside).toBeGreaterThan(0);
  });
});

describe("node faults: a frozen node", () => {
  const pause = { node: 2, atMs: 5_000, untilMs: 10_000 };
  // Open loop: other clients keep sending (and forwarding to it) while it is frozen.
  const openLoop = tinyWorkload({
    seed: 5,
    requests: 400,
    topics: 12,
    prefix: 400,
    suffix: 20,
    arrival: "open-loop",
    gapMs: 150,
  });
  const run = (faults: SimFaults | undefined): SimResult =>
    runSimulation({ ...base, ...(faults ? { faults } : {}) }, openLoop);

  it("handles nothing while frozen, then resumes: peers fall back, every request answered once", () => {
    const plain = run(undefined);
    const frozen = run({ node: { pauses: [pause] } });
    expectAllAnsweredOnce(frozen);
    // Its own clients wait it out ...
    const waited = frozen.records.filter((x) => x.origin === 2 && x.startMs >= 5_000 && x.startMs < 10_000);
    expect(waited.length).toBeGreaterThan(0);
    for (const x of waited) expect(x.endMs).toBeGreaterThanOrEqual(10_000);
    // ... and its peers move on without it (it is alive: the detector is wrong), then take the
    // answers it sends once resumed as late.
    expect(frozen.totals.fallbacks).toBeGreaterThan(plain.totals.fallbacks);
    expect(frozen.totals.lateReplies).toBeGreaterThan(plain.totals.lateReplies);
    expect(frozen.perNode[2]?.crashes).toBe(0);
  });

  it("is replayed exactly, and back-to-back pauses join", () => {
    const a = run({ node: { pauses: [pause] } });
    const b = run({ node: { pauses: [pause] } });
    expect(JSON.stringify({ ...b, wallMs: 0 })).toBe(JSON.stringify({ ...a, wallMs: 0 }));
    const split = run({
      node: {
        pauses: [
          { node: 2, atMs: 5_000, untilMs: 8_000 },
          { node: 2, atMs: 8_000, untilMs: 10_000 },
        ],
      },
    });
    expect(JSON.stringify(split.records)).toBe(JSON.stringify(a.records));
  });
});

describe("the daemon's node configuration (daemonConfig)", () => {
  it("runs with answer probes off and answer recovery on: no ETA in acks, lost answers asked for again", () => {
    const lossy: SimFaults = { network: { lossProb: 0.05 } };
    const noRecovery = { forwardTimeoutMs: 5_000, answerRecovery: false, maxTimedOutAttempts: 0 };
    const daemon = run(lossy, { daemonConfig: true, node: { forwardTimeoutMs: 5_000 } });
    const without = run(lossy, { daemonConfig: true, node: noRecovery });
    expectAllAnsweredOnce(daemon);
    expectAllAnsweredOnce(without);
    // Without recovery nothing probes: a lost answer waits its deadline.
    expect(without.totals.probes).toBe(0);
    expect(without.totals.resentAnswers).toBe(0);
    expect(daemon.totals.resentAnswers).toBeGreaterThan(0);
    expect(daemon.totals.p99LatencyMs).toBeLessThan(without.totals.p99LatencyMs);
  });

  it("holds forwards to the daemon's ack floor, not the core's", () => {
    // A silent partition and a slow detector: only the ack timeout ends a forward into it.
    const cut: SimFaults = {
      network: { partitions: [{ startMs: 5_000, endMs: 15_000, groups: [[2], [0, 1, 3]] }] },
    };
    const slowDetector = { suspectAfterPolls: 50, downAfterPolls: 100 };
    const floor = DAEMON_NODE_DEFAULTS.forwardAckTimeoutMs;
    const r = run(cut, { daemonConfig: true, node: slowDetector });
    expectAllAnsweredOnce(r);
    const inCut = r.records.filter((x) => x.startMs >= 5_000 && x.startMs < 15_000 && x.fallbacks > 0);
    expect(inCut.length).toBeGreaterThan(0);
    // An unacked forward is sent once more (answer recovery) before the cap of 2 timed-out waits.
    const cap = DAEMON_NODE_DEFAULTS.maxTimedOutAttempts;
    for (const x of inCut) {
      expect(x.networkMs).toBeGreaterThanOrEqual(floor - 1e-6);
      expect(x.networkMs).toBeLessThanOrEqual(cap * floor + 20);
    }
  });
});

describe("fault validation", () => {
  it("refuses a fault that names no node or cannot happen", () => {
    const w = tinyWorkload({ seed: 1, requests: 1 });
    const bad: [SimFaults, RegExp][] = [
      [{ node: { pauses: [{ node: 4, atMs: 1, untilMs: 2 }] } }, /pause node 4/],
      [{ node: { pauses: [{ node: 0, atMs: 5, untilMs: 5 }] } }, /pause must end/],
      [{ engine: { slowdowns: [{ node: 0, factor: 0 }] } }, /slowdown factor/],
      [{ engine: { slowdowns: [{ node: 0, factor: 2, atMs: 9, untilMs: 3 }] } }, /slowdown must end/],
      [{ engine: { failProb: 1.5 } }, /engine.failProb/],
      [{ network: { lossProb: -0.1 } }, /network.lossProb/],
    ];
    for (const [faults, re] of bad) expect(() => runSimulation({ ...base, faults }, w)).toThrow(re);
  });
});

describe("convergence after the faults", () => {
  it("is checked once the last engine run is over, not just the last answer", () => {
    // A slow engine still runs a forward its origin gave up on (300 ms timeout) after the last
    // answer; its tree changes then, and settling starts again from there (seed 373 of the soak).
    const r = runSimulation(
      smallCluster({
        nodes: 3,
        policy: "round-robin",
        seed: 373,
        pollMs: 50,
        capacityTokens: 400,
        // faultScheduleFor(373, 3, 5_000)
        faults: {
          network: {
            partitions: [
              { startMs: 2367, endMs: 3463, groups: [[0, 1], [2]] },
              { startMs: 3510, endMs: 4567, groups: [[1, 2], [0]] },
            ],
          },
          engine: {
            slowdowns: [
              { node: 0, factor: 5.9, atMs: 2307, untilMs: 3142 },
              { node: 2, factor: 3.8 },
            ],
          },
        },
        checkInvariants: true,
        settleMs: 3 * 50 * 1.1 + 10,
        node: { suspectAfterPolls: 3, forwardTimeoutMs: 300 },
      }),
      tinyWorkload({ seed: 373, requests: 40, topics: 4, prefix: 48 }),
    );
    expect(r.invariantViolations).toEqual([]);
    expect(r.totals.answered).toBe(40);
    expect(r.totals.duplicateRuns).toBeGreaterThan(0);
  });
});
