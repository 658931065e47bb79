/**
 * The unbounded-request fault class (faults/client.ts): one workload request asks for many output
 * tokens; it runs that long, is answered correctly, and the others are unchanged before it.
 */
import { describe, expect, it } from "vitest";
import { runSimulation } from "../../src/sim/run.js";
import type { SimConfig } from "../../src/sim/types.js";
import { smallCluster, tinyWorkload } from "./helpers.js";

const workload = tinyWorkload({ seed: 3, requests: 60, topics: 4, prefix: 200 });
const base: SimConfig = smallCluster({ policy: "local", capacityTokens: 4_000, checkInvariants: true });

describe("client faults: an unbounded request", () => {
  it("runs its many output tokens, answered once and correctly; earlier requests are unchanged", () => {
    const plain = runSimulation(base, workload);
    const r = runSimulation(
      { ...base, faults: { client: { unbounded: [{ request: 20, maxTokens: 4_000 }] } } },
      workload,
    );
    expect(r.invariantViolations).toEqual([]);
    expect(r.totals.answered).toBe(60);
    expect(r.totals.incorrect).toBe(0);
    expect(r.totals.duplicateReplies).toBe(0);
    const long = r.records.find((x) => x.index === 20);
    const was = plain.records.find((x) => x.index === 20);
    // Decoding 4,000 tokens instead of 1 (the profile's per-token decode cost).
    expect(long!.decodeMs).toBeCloseTo(was!.decodeMs * 4_000, 3);
    for (const x of r.records.filter((y) => y.index < 20))
      expect(x.latencyMs).toBe(plain.records.find((y) => y.index === x.index)!.latencyMs);
  });

  it("refuses a request index outside the workload or a bad token count", () => {
    const bad = (request: number, maxTokens: number) => () =>
      runSimulation({ ...base, faults: { client: { unbounded: [{ request, maxTokens }] } } }, workload);
    expect(bad(60, 10)).toThrow(/unbounded request 60 is not a request of the workload/);
    expect(bad(1, 0)).toThrow(/unbounded maxTokens must be an integer/);
  });
});
