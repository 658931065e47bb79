/**
 * 30% loss of every peer message, in the configuration the daemon ships (DAEMON_NODE_DEFAULTS: answer
 * recovery, at most 2 timed-out attempts before a request runs here ahead of the queue, hedged local
 * runs), fixed seeds. Issue 18's target: no request waits for the 30 s forward timeout — the slowest
 * takes at most 3 × the ack timeout + one local run (the fault-free run's longest engine run), as
 * `prefixmesh experiment faults` measures it on MMLU (closed loop: one request in flight). Every
 * request is answered exactly once and correctly.
 *
 * The tail this bound used to miss at half the seeds: a request whose cached peer acked it, then lost
 * its answer and the probes for it, ran here uncached, and that cold run of a long prompt alone
 * exceeds the bound. Its peer is now asked again while it runs (hedge.ts), and usually answers
 * first. Not a guarantee: when every re-ask or its answer is lost too, the cold run is the answer
 * (BENCHMARKS.md, "30% loss: hedged local runs", measures it over more seeds).
 */
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { DAEMON_NODE_DEFAULTS } from "../../src/core/node/config.js";
import { runSimulation } from "../../src/sim/run.js";
import type { SimConfig, SimResult } from "../../src/sim/types.js";
import { assembleWorkload } from "../../src/workload/assemble.js";
import { mmluWorkload } from "../../src/workload/mmlu-workload.js";
import { syntheticPool } from "../../src/workload/synthetic.js";
import type { Workload } from "../../src/workload/types.js";
import { daemonSimConfig } from "./helpers.js";

const MMLU_DIR = resolve(import.meta.dirname, "../../../shared/datasets/mmlu");
const haveMmlu = existsSync(join(MMLU_DIR, "test"));
if (!haveMmlu) console.warn(`[skip] the MMLU loss bound: ${MMLU_DIR} is absent (the shared dataset folder)`);

const ACK_MS = DAEMON_NODE_DEFAULTS.forwardAckTimeoutMs;
const FORWARD_TIMEOUT_MS = DAEMON_NODE_DEFAULTS.forwardTimeoutMs;
/** Without what this test is about: the daemon's configuration before answer recovery and the cap. */
const WITHOUT = { answerRecovery: false, maxTimedOutAttempts: 0 };

function run(w: Workload, lossProb: number, seed: number, extra: Partial<SimConfig> = {}): SimResult {
  return runSimulation(
    {
      ...daemonSimConfig(seed, 4),
      ...(lossProb > 0 ? { faults: { network: { lossProb } } } : {}),
      ...extra,
    },
    w,
  );
}

function expectAllAnsweredOnce(r: SimResult, requests: number): void {
  expect(r.invariantViolations).toEqual([]);
  expect(r.totals.answered).toBe(requests);
  expect(r.totals.incorrect).toBe(0);
  expect(r.totals.duplicateReplies).toBe(0);
}

const maxLatency = (r: SimResult) => Math.max(...r.records.map((x) => x.latencyMs));
const maxRun = (r: SimResult) => Math.max(...r.records.map((x) => x.prefillMs + x.decodeMs));
/** The longest a request waited outside its own queue and its own run: on forwards and the network. */
const maxNetworkWait = (r: SimResult) =>
  Math.max(...r.records.map((x) => x.latencyMs - x.queueMs - x.prefillMs - x.decodeMs));

describe("30% message loss in the daemon's configuration", () => {
  it.skipIf(!haveMmlu)(
    "MMLU, closed loop, seeds 1–3: max ≤ 3 × the ack timeout + the fault-free run's longest run",
    async () => {
      const requests = 3_000;
      const w0 = await mmluWorkload({ dir: MMLU_DIR, seed: 1, requests });
      const w = { ...w0, requests: w0.requests.map((r) => ({ ...r, temperature: 0 })) };
      for (const seed of [1, 2, 3]) {
        const faultFree = run(w, 0, seed);
        const r = run(w, 0.3, seed);
        expectAllAnsweredOnce(r, requests);
        expect(r.totals.resentAnswers).toBeGreaterThan(0); // lost answers were recovered, not rerun
        expect(r.totals.hedgedAnswers).toBeGreaterThan(0); // silent peers answered runs under way
        expect(maxLatency(r)).toBeLessThanOrEqual(3 * ACK_MS + maxRun(faultFree));
        // What it spent outside its own queue and run: a few ack timeouts and overdue answers' slack.
        expect(maxNetworkWait(r)).toBeLessThan(FORWARD_TIMEOUT_MS / 4);
      }
    },
    180_000,
  );

  it("synthetic MMLU-shaped, invariants checked: no forward timeout waited, fewer fallbacks than without recovery", () => {
    const requests = 1_500;
    const w = assembleWorkload("synthetic", "synthetic", syntheticPool({ subjects: 8, scale: 0.05 }), {
      seed: 5,
      requests,
      skewed: false,
    });
    const small = { capacityTokens: 3_000, checkInvariants: true };
    const r = run(w, 0.3, 5, small);
    expectAllAnsweredOnce(r, requests);
    const before = run(w, 0.3, 5, { ...small, node: WITHOUT });
    expectAllAnsweredOnce(before, requests);
    // A lost answer is asked for again (the peer re-sends it) instead of run a second time elsewhere.
    expect(r.totals.resentAnswers).toBeGreaterThan(0);
    expect(before.totals.resentAnswers).toBe(0);
    expect(r.totals.fallbacks).toBeLessThan(0.6 * before.totals.fallbacks);
    // Chained losses cost a few ack timeouts, never the forward timeout.
    expect(maxLatency(r)).toBeLessThan(maxLatency(before));
    expect(maxLatency(r)).toBeLessThan(FORWARD_TIMEOUT_MS / 5);
  });
});
