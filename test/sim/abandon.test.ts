/**
 * Clients that hang up (faults/client.ts `abandon`, the node's `client-gone` input), in the daemon's
 * configuration: the abandoned requests' queued and forwarded work is dropped, so the mesh runs fewer
 * jobs; nobody is answered twice or unasked (a reply after the hang-up would be one); every other
 * request is answered correctly; and under the seeds' fault schedules the invariants still hold.
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

  it("under the seeds' fault schedules: nobody answered twice or unasked, every request finishes", () => {
    for (let seed = 1; seed <= 20; seed++) {
      const base = daemonFaultConfig(seed, 4, 3_000);
      const faults = { ...base.faults, client: { abandon } };
      const r = runSimulation({ ...base, faults }, burst);
      const what = `seed ${seed}`;
      expect(r.invariantViolations, what).toEqual([]);
      expect(r.totals.duplicateReplies, what).toBe(0);
      expect(r.totals.incorrect, what).toBe(0);
      expect(r.totals.answered + r.totals.failed, what).toBe(REQUESTS);
    }
  }, 120_000);
});
