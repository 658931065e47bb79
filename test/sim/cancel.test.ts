/**
 * Overload with the real node code: forwards that cannot finish before the origin's timeout are
 * refused at once or cancelled while queued, so a fallback does not compute a request twice.
 */
import { describe, expect, it } from "vitest";
import { runSimulation } from "../../src/sim/run.js";
import { syntheticMmlu } from "../../src/workload/synthetic.js";
import { smallCluster } from "./helpers.js";

describe("simulator — cancelled and deadline-refused forwards under overload", () => {
  it("falls back without duplicate computation, answering everything exactly once", () => {
    // 12 req/s on 4 batching-free nodes is past capacity: queues (and waits) grow without bound.
    const w = syntheticMmlu({ seed: 1, openLoopRate: 12, nodes: 4, requests: 1_000, skewed: true });
    // The profile's own (paper-sized) cache: the overload, not eviction, is under test.
    const r = runSimulation(
      smallCluster({
        pollMs: 500,
        capacityTokens: undefined,
        checkInvariants: true,
        node: { forwardTimeoutMs: 5_000 },
      }),
      w,
    );
    const t = r.totals;
    expect(r.invariantViolations).toEqual([]);
    expect(t.answered).toBe(1_000);
    expect(t.duplicateReplies).toBe(0);
    expect(t.incorrect).toBe(0);
    // Forwards did fail over (the overload is real) ...
    expect(t.fallbacks).toBeGreaterThan(20);
    expect(t.rejectedDeadline + t.cancelledForwards).toBeGreaterThan(20);
    // ... yet (almost) nothing ran twice: only a forward already started when its origin gave up.
    expect(t.duplicateRuns).toBeLessThanOrEqual(t.fallbacks / 20);
    expect(t.engineRuns).toBe(1_000 + t.duplicateRuns);
  });
});
