/**
 * Forward acks in the simulator (fixed seeds): a lost forward, a lost answer, a partitioned or
 * crashed target no longer hold a request for the whole forward timeout (or until the failure
 * detector suspects the peer), and nothing is lost or answered twice on the way. "acks off" is the
 * same run with the ack timeout set to the forward timeout (only the forward timeout applies).
 */
import { describe, expect, it } from "vitest";
import { runSimulation } from "../../src/sim/run.js";
import type { SimConfig, SimFaults, SimResult } from "../../src/sim/types.js";
import { smallCluster, tinyWorkload } from "./helpers.js";

/** Set explicitly, not left to the defaults: the bounds below are stated in these. */
const FORWARD_TIMEOUT_MS = 30_000;
const ACK_TIMEOUT_MS = 250;
const base: SimConfig = smallCluster({
  capacityTokens: 2_000,
  checkInvariants: true,
  node: { forwardTimeoutMs: FORWARD_TIMEOUT_MS, forwardAckTimeoutMs: ACK_TIMEOUT_MS },
});
// 12 topics over 4 small caches: about 60% of requests are forwarded.
const workload = tinyWorkload({ seed: 5, requests: 600, topics: 12, prefix: 400, suffix: 20 });
/** An ack timeout as long as the forward timeout: acks are not waited for. */
const ACKS_OFF = { forwardAckTimeoutMs: FORWARD_TIMEOUT_MS };

function run(faults: SimFaults, node: SimConfig["node"] = {}, extra: Partial<SimConfig> = {}): SimResult {
  return runSimulation({ ...base, faults, node: { ...base.node, ...node }, ...extra }, workload);
}

function expectAllAnsweredOnce(r: SimResult): void {
  expect(r.invariantViolations).toEqual([]);
  expect(r.totals.answered).toBe(600);
  expect(r.totals.failed).toBe(0);
  expect(r.totals.incorrect).toBe(0);
  expect(r.totals.duplicateReplies).toBe(0);
}

const maxNetworkMs = (r: SimResult, from = 0, to = Number.POSITIVE_INFINITY): number =>
  Math.max(0, ...r.records.filter((x) => x.startMs >= from && x.startMs < to).map((x) => x.networkMs));

describe("simulator — forward acks", () => {
  it("5% message loss: p99 from the forward timeout down to about a second, nothing lost", () => {
    const off = run({ network: { lossProb: 0.05 } }, ACKS_OFF);
    const on = run({ network: { lossProb: 0.05 } });
    expectAllAnsweredOnce(off);
    expectAllAnsweredOnce(on);
    expect(off.totals.forwardedShare).toBeGreaterThan(0.5);
    expect(off.totals.p99LatencyMs).toBeGreaterThan(FORWARD_TIMEOUT_MS); // waited out a lost forward or answer
    expect(on.totals.p99LatencyMs).toBeLessThan(2_000);
    expect(maxNetworkMs(on)).toBeLessThan(2_000);
    expect(on.totals.ackTimeouts).toBeGreaterThan(0);
    // Lost answers are fetched again by probes instead of recomputed elsewhere.
    expect(on.totals.probes).toBeGreaterThan(0);
    expect(on.totals.resentAnswers).toBeGreaterThan(0);
    expect(on.totals.duplicateRuns).toBeLessThan(off.totals.duplicateRuns);
  });

  it("a partitioned or crashed target: fallback within the ack timeout, not the detector's", () => {
    // A slow failure detector (50 × Δpoll = 5 s) shows what the acks alone bound.
    const slowDetector = { suspectAfterPolls: 50 };
    const cut: SimFaults = {
      network: { partitions: [{ startMs: 5_000, endMs: 15_000, groups: [[2], [0, 1, 3]] }] },
    };
    const crash: SimFaults = { node: { crashes: [{ node: 2, atMs: 5_000, restartAtMs: 15_000 }] } };
    for (const faults of [cut, crash]) {
      const off = run(faults, { ...slowDetector, ...ACKS_OFF }, { settleMs: 1_000 });
      const on = run(faults, slowDetector, { settleMs: 1_000 });
      expectAllAnsweredOnce(off);
      expectAllAnsweredOnce(on);
      expect(maxNetworkMs(off, 5_000, 15_000)).toBeGreaterThan(4_000);
      // Forwards sent into the fault: one ack timeout, then the next candidate.
      expect(maxNetworkMs(on, 5_000, 15_000)).toBeLessThanOrEqual(ACK_TIMEOUT_MS + 10);
      expect(on.totals.ackTimeouts).toBeGreaterThan(0);
    }
  });

  it("duplicated and reordered acks are harmless", () => {
    const r = run(
      { network: { dupProb: 0.3, reorderProb: 0.2, untilMs: 20_000 } },
      {},
      { settleMs: 1_000, seed: 2 },
    );
    expectAllAnsweredOnce(r);
    expect(r.totals.messages["forward-ack"]?.count ?? 0).toBeGreaterThan(100);
    expect(r.totals.ackTimeouts).toBe(0);
    expect(r.totals.fallbacks).toBe(0);
    expect(r.totals.duplicateRuns).toBe(0);
  });

  it("acks deferred as the daemon defers them (ackDeferMs 10): still bounded, nothing lost", () => {
    const deferred = run({ network: { lossProb: 0.05 } }, { ackDeferMs: 10 });
    expectAllAnsweredOnce(deferred);
    expect(deferred.totals.p99LatencyMs).toBeLessThan(2_000);
    expect(maxNetworkMs(deferred)).toBeLessThan(2_000);
    expect(deferred.totals.messages["forward-ack"]?.count ?? 0).toBeGreaterThan(0);
    expect(deferred.totals.ackTimeouts).toBeGreaterThan(0); // lost forwards still fall back fast
  });

  it("one re-send before falling back (forwardResends 1): fewer duplicate runs, still bounded", () => {
    const once = run({ network: { lossProb: 0.05 } });
    const resend = run({ network: { lossProb: 0.05 } }, { forwardResends: 1 });
    expectAllAnsweredOnce(resend);
    // A lost ack no longer makes the request run twice: the re-send is acked again, not rerun.
    expect(resend.totals.duplicateRuns).toBeLessThan(once.totals.duplicateRuns);
    expect(resend.totals.resends).toBeGreaterThan(0);
    expect(once.totals.resends).toBe(0); // forwardResends 0: an unacked attempt is abandoned at once
    expect(resend.totals.fallbacks).toBeLessThan(once.totals.fallbacks);
    // At most one more ack timeout on the worst request (with a margin of one more).
    expect(resend.totals.p99LatencyMs).toBeLessThan(once.totals.p99LatencyMs + 2 * ACK_TIMEOUT_MS);
    expect(maxNetworkMs(resend)).toBeLessThan(2_500);
  });
});
