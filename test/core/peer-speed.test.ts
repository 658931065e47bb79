/** cost-aware's `peerSpeed`: a peer's engine speed, learned from its answers, scales its costs. */
import { describe, expect, it } from "vitest";
import { speedFactor } from "../../src/core/node/policies/cost-aware.js";
import { type Candidate, createPolicy, type RoutingContext } from "../../src/core/node/policies/index.js";
import { Targets } from "../../src/core/node/targets.js";

const costs = { prefillFixedMs: 20, prefillMsPerToken: 0.5, serviceMs: 0, rttPriorMs: 250, samples: 100 };
const ctx = (promptTokens: number): RoutingContext => ({ promptTokens, now: 0, random: () => 0.5, costs });

function peer(match: number, observedMs?: number, uncached = 100, samples = 5): Candidate {
  return {
    id: "p",
    self: false,
    estimatedMatch: match,
    estimateAgeMs: 0,
    queueDepth: 0,
    rttMs: 2,
    capacityTokens: 10_000,
    ...(observedMs === undefined ? {} : { observedPrefill: { prefillMs: observedMs, uncached, samples } }),
  };
}
const self: Candidate = {
  id: "s",
  self: true,
  estimatedMatch: 0,
  estimateAgeMs: 0,
  queueDepth: 0,
  rttMs: 0,
  capacityTokens: 10_000,
};

describe("peer speed", () => {
  it("is the observed prefill over our own fit at the same uncached tokens, bounded, and 1 when unknown", () => {
    // Our fit at 100 uncached tokens: 20 + 0.5 × 100 = 70 ms.
    expect(speedFactor(peer(0, 210), costs, true)).toBeCloseTo(3, 9);
    expect(speedFactor(peer(0, 35), costs, true)).toBeCloseTo(0.5, 9);
    expect(speedFactor(peer(0, 70_000), costs, true)).toBe(10);
    expect(speedFactor(peer(0, 210), costs, false)).toBe(1);
    expect(speedFactor(peer(0, 210, 100, 2), costs, true)).toBe(1);
    expect(speedFactor(peer(0), costs, true)).toBe(1);
    expect(
      speedFactor({ ...self, observedPrefill: { prefillMs: 210, uncached: 100, samples: 9 } }, costs, true),
    ).toBe(1);
  });

  it("a 3× slower peer gets the request only when its cache saves more than its slowness costs", () => {
    const on = createPolicy("cost-aware", { peerSpeed: true, rentOrBuy: false });
    const off = createPolicy("cost-aware", { rentOrBuy: false });
    // Prompt 1,000 tokens. Self: 20 + 500 = 520 ms. Peer holding 900: 3 × (20 + 50) + 2 = 212 ms →
    // forward.
    expect(on.rank([self, peer(900, 210)], ctx(1_000))[0]).toBe(1);
    // Peer holding 400: 3 × (20 + 300) + 2 = 962 ms > 520 → stay; without peerSpeed it forwards (322 ms).
    expect(on.rank([self, peer(400, 210)], ctx(1_000))[0]).toBe(0);
    expect(off.rank([self, peer(400, 210)], ctx(1_000))[0]).toBe(1);
  });

  it("the origin learns it from answers: moving means of prefill and uncached tokens", () => {
    const t = new Targets();
    t.reset(["p"]);
    expect(t.observed("p")).toBeUndefined();
    t.samplePrefill("p", 100, 50);
    t.samplePrefill("p", 200, 150);
    const o = t.observed("p");
    expect(o?.samples).toBe(2);
    expect(o?.prefillMs).toBeCloseTo(110, 9);
    expect(o?.uncached).toBeCloseTo(60, 9);
    // Nonsense from a peer is ignored.
    t.samplePrefill("p", Number.NaN, 10);
    t.samplePrefill("p", 10, -1);
    expect(t.observed("p")?.samples).toBe(2);
  });
});
