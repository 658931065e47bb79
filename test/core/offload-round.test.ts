/**
 * Offload's accounting (offload.ts): one round charges each request it moves to its peer's wait at
 * once, counted for every node that could be moving work there in the same round, and peers are
 * weighed by their advertised speed; cost-aware's bounded wait floor (policies/cost-aware.ts).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { LearnedCosts } from "../../src/core/node/cost-model.js";
import { OffloadRound, offloadTarget, type Waiting } from "../../src/core/node/offload.js";
import { waitFloorMs } from "../../src/core/node/policies/cost-aware.js";
import type { Candidate } from "../../src/core/node/policies/policy.js";
import type { EngineCosts } from "../../src/core/snapshot.js";

const ours: EngineCosts = { fixedMs: 100, msPerUncached: 2, msPerCached: 0, msPerOutput: 5 };
const k: LearnedCosts = {
  prefillFixedMs: 100,
  prefillMsPerToken: 2,
  serviceMs: 1_000,
  rttPriorMs: 2,
  samples: 100,
  engine: ours,
};
const times = (f: number): EngineCosts => ({
  fixedMs: ours.fixedMs * f,
  msPerUncached: ours.msPerUncached * f,
  msPerCached: 0,
  msPerOutput: ours.msPerOutput * f,
});

function cand(id: string, queueDepth: number, extra: Partial<Candidate> = {}): Candidate {
  return {
    id,
    self: id === "self",
    estimatedMatch: 0,
    estimateAgeMs: 0,
    queueDepth,
    rttMs: 2,
    capacityTokens: 0,
    ...extra,
  };
}

const waiting = (startsInMs: number, i = 0): Waiting => ({
  reqId: `r${i}`,
  request: { id: `r${i}`, tokens: new Uint32Array(450).fill(1), maxTokens: 1 },
  startsInMs,
});

describe("an offload round", () => {
  it("charges each move to its peer at once, once per node that could herd onto it", () => {
    const round = new OffloadRound();
    // Self waits 10 s; one idle peer among three: four candidates, so three nodes could herd onto it.
    const cands = [cand("self", 10), cand("a", 0), cand("b", 20), cand("c", 20)];
    expect(offloadTarget(waiting(10_000), cands, k, undefined, round)?.to).toBe("a");
    // The run (1,000 ms: at least the service time) counted three times.
    expect(round.charged("a")).toBe(3 * 1_000);
    expect(round.charged("b")).toBe(0);
    // Without a round nothing is remembered: the same peer again, for ever (the herd).
    const moved = [0, 1, 2, 3, 4, 5].map((i) => offloadTarget(waiting(10_000, i), cands, k)?.to);
    expect(moved.every((x) => x === "a")).toBe(true);
  });

  it("moves no more to a peer than its share of its spare time (naive model)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 30 }),
        fc.integer({ min: 0, max: 10 }),
        fc.integer({ min: 1, max: 6 }),
        (selfJobs, peerJobs, others) => {
          const round = new OffloadRound();
          const cands = [cand("self", selfJobs), cand("p", peerJobs)];
          for (let i = 0; i < others; i++) cands.push(cand(`x${i}`, 1_000));
          const herd = cands.length - 1;
          let moved = 0;
          // Our waiting requests, last first: the i-th from the tail starts after selfJobs − 1 − i jobs.
          for (let i = 0; i < selfJobs; i++) {
            const starts = (selfJobs - 1 - i) * k.serviceMs;
            if (offloadTarget(waiting(starts, i), cands, k, undefined, round)?.to === "p") moved++;
          }
          // A naive model: the peer finishes a moved request after (its queue + herd × moved) jobs,
          // plus its run; a move happens only while that beats our start by a service time.
          let naive = 0;
          for (let i = 0; i < selfJobs; i++) {
            const starts = (selfJobs - 1 - i) * k.serviceMs;
            const peer = (peerJobs + herd * naive) * k.serviceMs + 2 + 1_000;
            if (peer < starts + 1_000 - k.serviceMs) naive++;
          }
          expect(moved).toBe(naive);
        },
      ),
    );
  });

  it("weighs a peer's queue and run by its advertised speed", () => {
    // We are 10× slower than our peers: a fast peer with 5 jobs queued (0.5 s of ours) beats our 3.
    const slowK: LearnedCosts = {
      ...k,
      serviceMs: 10_000,
      prefillFixedMs: 1_000,
      prefillMsPerToken: 20,
      engine: times(10),
    };
    const fast = cand("fast", 5, { advertisedCosts: ours });
    expect(
      offloadTarget(waiting(30_000), [cand("self", 3), fast], slowK, undefined, new OffloadRound())?.to,
    ).toBe("fast");
    // We are fast; a 10× slower idle peer takes 10 s per run: not sooner than our 2 s wait.
    const slow = cand("slow", 0, { advertisedCosts: times(10) });
    expect(
      offloadTarget(waiting(2_000), [cand("self", 2), slow], k, undefined, new OffloadRound()),
    ).toBeUndefined();
    // The same idle peer with our speed takes it.
    const same = cand("same", 0, { advertisedCosts: ours });
    expect(offloadTarget(waiting(2_000), [cand("self", 2), same], k, undefined, new OffloadRound())?.to).toBe(
      "same",
    );
  });
});

describe("cost-aware's wait floor", () => {
  it("is our wait unbounded, and at most the bound above the peer's own wait", () => {
    expect(waitFloorMs(30_000, 500, 100)).toBe(30_000);
    expect(waitFloorMs(30_000, 500, 100, 1)).toBe(600);
    expect(waitFloorMs(300, 500, 100, 1)).toBe(300);
    fc.assert(
      fc.property(fc.nat(1e6), fc.nat(1e6), fc.nat(1e5), fc.integer({ min: 0, max: 8 }), (s, p, svc, b) => {
        const f = waitFloorMs(s, p, svc, b);
        expect(f).toBeLessThanOrEqual(s);
        expect(f).toBeLessThanOrEqual(p + b * svc);
        expect(f).toBeGreaterThanOrEqual(Math.min(s, p));
      }),
    );
  });
});
