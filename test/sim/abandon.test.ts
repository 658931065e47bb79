/**
 * Clients that hang up (faults/client.ts `abandon`, the node's `client-gone` input), in the daemon's
 * configuration: the abandoned requests' queued and forwarded work is dropped, so the mesh runs fewer
 * jobs, and the runs they leave going are aborted; nobody is answered twice or unasked (a reply after
 * the hang-up would be one); every other request is answered correctly; and under the seeds' fault
 * schedules the invariants still hold.
 */
import { describe, expect, it } from "vitest";
import { runSimulation } from "../../src/sim/run.js";
import type { SimConfig } from "../../src/sim/types.js";
import { daemonFaultConfig, daemonSimConfig, tinyWorkload } from "./helpers.js";

const REQUESTS = 60;
/** A burst: requests arrive faster than four nodes serve them, so most wait in a queue. */
const burst = tinyWorkload({
  seed: 5,
  requests: REQUESTS,
  topics: 4,
  prefix: 200,
  arrival: "open-loop",
  gapMs: 1,
});
/** Every third request's client hangs up 3 ms after sending it (queued, forwarded or just started). */
const abandon = Array.from({ length: REQUESTS / 3 }, (_, i) => ({ request: 3 * i + 1, afterMs: 3 }));

describe("sim: clients that hang up", () => {
  it("drops their waiting work: fewer engine runs, no reply for them, the rest answered", () => {
    const base: SimConfig = { ...daemonSimConfig(1, 4), capacityTokens: 3_000, checkInvariants: true };
    const plain = runSimulation(base, burst);
    const r = runSimulation({ ...base, faults: { client: { abandon } } }, burst);
    expect(r.invariantViolations).toEqual([]);
    expect(r.totals.duplicateReplies).toBe(0);
    expect(r.totals.incorrect).toBe(0);
    expect(r.totals.abandoned).toBeGreaterThan(abandon.length / 2);
    expect(r.totals.answered + r.totals.failed).toBe(REQUESTS);
    expect(r.totals.failed).toBe(r.totals.abandoned);
    // Each abandoned request that had not started costs no run anywhere.
    expect(plain.totals.engineRuns).toBeGreaterThanOrEqual(REQUESTS);
    expect(r.totals.engineRuns).toBeLessThan(plain.totals.engineRuns - abandon.length / 2);
  });

  it("aborts the runs they leave going (abortRuns): less engine time, the tree still the engine's cache", () => {
    // Long answers (a second of decode each), no backlog: most jobs run when their client leaves.
    const steady = tinyWorkload({
      seed: 5,
      requests: REQUESTS,
      topics: 4,
      prefix: 200,
      arrival: "open-loop",
      gapMs: 600,
    });
    const long = { ...steady, requests: steady.requests.map((q) => ({ ...q, maxTokens: 200 })) };
    const late = abandon.map((a) => ({ ...a, afterMs: 500 }));
    const base: SimConfig = {
      ...daemonSimConfig(1, 4),
      capacityTokens: 3_000,
      checkInvariants: true,
      faults: { client: { abandon: late } },
    };
    const kept = runSimulation({ ...base, node: { abortRuns: false } }, long);
    const r = runSimulation(base, long); // the sim engine is abortable: on by default
    for (const x of [kept, r]) {
      expect(x.invariantViolations).toEqual([]);
      expect(x.totals.duplicateReplies).toBe(0);
      expect(x.totals.incorrect).toBe(0);
      expect(x.totals.answered + x.totals.failed).toBe(REQUESTS);
    }
    expect(kept.totals).toMatchObject({ abortedClientGone: 0, abortedCancelled: 0, abortedHedged: 0 });
    expect(r.totals.abortedClientGone).toBeGreaterThan(0);
    expect(r.totals.abortedCancelled).toBeGreaterThan(0);
    // Each aborted run gives back what was left of it: a tenth of the engine time at least here.
    expect(r.totals.engineBusyMs).toBeLessThan(0.9 * kept.totals.engineBusyMs);
  });

  it("under the seeds' fault schedules: nobody answered twice or unasked, every request finishes", () => {
    let aborted = 0;
    for (let seed = 1; seed <= 20; seed++) {
      const base = daemonFaultConfig(seed, 4, 3_000);
      // Half the seeds hang up later, while more of the jobs run (and are aborted).
      const afterMs = seed % 2 === 0 ? 400 : 3;
      const faults = { ...base.faults, client: { abandon: abandon.map((a) => ({ ...a, afterMs })) } };
      const r = runSimulation({ ...base, faults }, burst);
      const what = `seed ${seed}`;
      expect(r.invariantViolations, what).toEqual([]);
      expect(r.totals.duplicateReplies, what).toBe(0);
      expect(r.totals.incorrect, what).toBe(0);
      expect(r.totals.answered + r.totals.failed, what).toBe(REQUESTS);
      aborted += r.totals.abortedClientGone + r.totals.abortedCancelled + r.totals.abortedHedged;
    }
    // The invariants were checked with aborts happening.
    expect(aborted).toBeGreaterThan(0);
  }, 120_000);
});
