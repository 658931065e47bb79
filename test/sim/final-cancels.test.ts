/**
 * Final cancels owed (abort-runs.ts `owedCancels`) in the daemon's configuration, seeded: under
 * message loss a request gives up on a peer whose acks were lost while that peer runs it, and runs
 * at its origin. Once no answer of that peer can be taken (the request runs at its origin, or
 * settled), the peer gets a final cancel and aborts the run; nobody is answered twice or wrongly,
 * and every request is answered.
 */
import { describe, expect, it } from "vitest";
import { runSimulation } from "../../src/sim/run.js";
import type { SimConfig, SimResult } from "../../src/sim/types.js";
import { daemonSimConfig, tinyWorkload } from "./helpers.js";

const REQUESTS = 200;
const SEEDS = [1, 2, 3, 4];

/** Sampled answers of 200 tokens (a second or more each) arriving steadily, 30% of messages lost. */
function lossyRun(seed: number, abortRuns: boolean): SimResult {
  const w = tinyWorkload({
    seed,
    requests: REQUESTS,
    topics: 4,
    prefix: 200,
    arrival: "open-loop",
    gapMs: 300,
  });
  const long = { ...w, requests: w.requests.map((q) => ({ ...q, maxTokens: 200, temperature: 0.7 })) };
  const config: SimConfig = {
    ...daemonSimConfig(seed, 4),
    capacityTokens: 3_000,
    checkInvariants: true,
    faults: { network: { lossProb: 0.3 } },
    node: { abortRuns },
  };
  return runSimulation(config, long);
}

describe("sim: the peers a request moved on from, under loss", () => {
  it("abort the runs nobody takes the answer of; every request answered once and correctly", () => {
    let aborted = 0;
    const busyMs = { aborting: 0, running: 0 };
    let givenUpRuns = 0;
    for (const seed of SEEDS)
      for (const abortRuns of [true, false]) {
        const r = lossyRun(seed, abortRuns);
        const what = `seed ${seed}, abortRuns ${abortRuns}`;
        expect(r.invariantViolations, what).toEqual([]);
        expect(r.totals.duplicateReplies, what).toBe(0);
        expect(r.totals.incorrect, what).toBe(0);
        expect(r.totals.answered, what).toBe(REQUESTS);
        if (abortRuns) {
          aborted += r.totals.abortedCancelled;
          busyMs.aborting += r.totals.engineBusyMs;
        } else {
          givenUpRuns += r.totals.duplicateRuns;
          busyMs.running += r.totals.engineBusyMs;
        }
      }
    expect(aborted).toBeGreaterThan(0);
    // Without aborts the same loss leaves runs nobody takes the answer of running to their end, and
    // the aborted ones' remainders are engine time saved.
    expect(givenUpRuns).toBeGreaterThan(0);
    expect(busyMs.aborting).toBeLessThan(busyMs.running);
  }, 300_000);
});
