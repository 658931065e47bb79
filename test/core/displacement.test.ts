/** Rent-or-buy's displacement term: the hole a bought duplicate keeps in a full cluster's caches. */
import { describe, expect, it } from "vitest";
import { resolveNodeConfig } from "../../src/core/node/config.js";
import { displacementMs } from "../../src/core/node/policies/displacement.js";
import { type Candidate, createPolicy } from "../../src/core/node/policies/index.js";
import { Prng } from "../../src/core/prng.js";

describe("displacementMs", () => {
  it("charges each displaced prefix's recomputation, less its round trip, to every peer", () => {
    // 4 nodes, 2 ms/token: a 1000-token buy displaces two 500-token prefixes, each 1000 ms to
    // recompute against a 400 ms round trip: 2 × 3 peers × 600 ms at full pressure.
    expect(displacementMs(1, 4, 2, 1000, 500, 400)).toBeCloseTo(3600, 9);
    expect(displacementMs(0.5, 4, 2, 1000, 500, 400)).toBeCloseTo(1800, 9);
    expect(displacementMs(1, 16, 2, 1000, 500, 400)).toBeCloseTo(18000, 9);
  });

  it("is free with room in the cache, alone, or where renting costs more than recomputing", () => {
    expect(displacementMs(0, 4, 2, 1000, 500, 400)).toBe(0);
    expect(displacementMs(1, 1, 2, 1000, 500, 400)).toBe(0);
    expect(displacementMs(1, 4, 2, 1000, 500, 2000)).toBe(0); // 1000 ms prefill < 2000 ms round trip
    expect(displacementMs(1, 4, 2, 3000, 500, 2000)).toBe(0); // what is bought does not matter
    expect(displacementMs(1, 4, 0, 1000, 500, 400)).toBe(0);
    expect(displacementMs(1, 4, 2, 1000, 0, 400)).toBe(0);
    expect(displacementMs(7, 4, 2, 1000, 500, 400)).toBe(displacementMs(1, 4, 2, 1000, 500, 400));
  });
});

describe("cost-aware rent-or-buy under eviction pressure", () => {
  const prior = resolveNodeConfig({ id: "A", capacityTokens: 1000 }).costPrior;
  const cand = (id: string, self: boolean, match: number, rttMs: number): Candidate => ({
    id,
    self,
    estimatedMatch: match,
    estimateAgeMs: 0,
    queueDepth: 0,
    rttMs,
    capacityTokens: 1000,
  });
  // A 1000-token prompt, 960 of them cached at peer B; self holds none of it.
  const ctx = (rttMs: number, pressure?: number, prefixTokens?: number) => {
    const r = new Prng(1);
    return {
      promptTokens: 1000,
      now: 0,
      random: () => r.next(),
      costs: {
        prefillFixedMs: 20,
        prefillMsPerToken: 1,
        serviceMs: 0,
        rttPriorMs: prior.rttMs,
        samples: 100,
      },
      expectedReuse: 5,
      survivingReuse: 5,
      ...(pressure === undefined ? {} : { evictionPressure: pressure }),
      ...(prefixTokens === undefined ? {} : { prefixTokens }),
      cands: [cand("A", true, 0, rttMs), cand("B", false, 960, rttMs)],
    };
  };
  const firstOf = (rttMs: number, pressure?: number, config = {}, prefixTokens?: number) => {
    const c = ctx(rttMs, pressure, prefixTokens);
    return createPolicy("cost-aware", config).rank(c.cands, c)[0];
  };

  it("buys a prefix a peer holds when its cache has room, rents it when the cache is full", () => {
    // RTT 400 ms < the 960 ms prefill a hit saves: renting beats the hole a duplicate would cause.
    expect(firstOf(400)).toBe(0); // room: buys (serves here)
    expect(firstOf(400, 1)).toBe(1); // full: rents (forwards)
    expect(firstOf(400, 1, { evictionAware: false })).toBe(0); // the paper grid's rule: buys
  });

  it("still buys under pressure where a round trip costs more than recomputing", () => {
    // RTT 2000 ms > the prefill saved: local is the better plan, the hole is free.
    expect(firstOf(2000, 1)).toBe(0);
    // A long prefix over a 400 ms link, where the prefixes it would displace are short (300 tokens,
    // 300 ms to recompute): peers would not rent those, so no hole; it is bought.
    expect(firstOf(400, 1, {}, 300)).toBe(0);
    expect(firstOf(400, 1, {}, 960)).toBe(1);
  });
});
