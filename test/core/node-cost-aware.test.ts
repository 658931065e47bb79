/** Cost-aware routing: the policy's choices, the learned costs, prefix demand and the RTT echo. */
import { describe, expect, it } from "vitest";
import { PrefillFit } from "../../src/core/node/cost-model.js";
import { hitChain, PrefixDemand, survival } from "../../src/core/node/demand.js";
import type { Candidate, RoutingContext } from "../../src/core/node/policies/index.js";
import { createPolicy } from "../../src/core/node/policies/index.js";
import type { PeerMessage } from "../../src/core/node/types.js";
import { Prng } from "../../src/core/prng.js";
import { PAPER_H100_QWEN05B } from "../../src/engines/sim/profiles.js";
import { Harness } from "./node-harness.js";

function cand(id: string, self: boolean, match: number, rttMs: number | undefined, queue = 0): Candidate {
  return {
    id,
    self,
    estimatedMatch: match,
    estimateAgeMs: 0,
    queueDepth: queue,
    rttMs: self ? 0 : rttMs,
    capacityTokens: 10_000,
  };
}

function ctx(extra: Partial<RoutingContext> = {}): RoutingContext {
  const r = new Prng(3);
  return {
    promptTokens: 1000,
    now: 0,
    random: () => r.next(),
    costs: { prefillFixedMs: 100, prefillMsPerToken: 2, serviceMs: 300, rttPriorMs: 250, samples: 100 },
    ...extra,
  };
}

describe("cost-aware policy", () => {
  const p = createPolicy("cost-aware");

  it("serves locally when the RTT exceeds the prefill the peer would save", () => {
    // The peer saves 500 tokens × 2 ms = 1000 ms of prefill; the round trip costs 1200 ms.
    const c = [cand("A", true, 0, 0), cand("B", false, 500, 1200)];
    expect(p.rank(c, ctx())[0]).toBe(0);
  });

  it("forwards when the prefill saved exceeds the RTT", () => {
    const c = [cand("A", true, 0, 0), cand("B", false, 500, 400)];
    expect(p.rank(c, ctx())[0]).toBe(1);
  });

  it("ties go to self; a deep queue outweighs a cache advantage", () => {
    expect(p.rank([cand("A", true, 100, 0), cand("B", false, 100, 0)], ctx())[0]).toBe(0);
    // 4 queued × 300 ms = 1200 ms wait > 1000 ms of prefill saved.
    const c = [cand("A", true, 0, 0), cand("B", false, 500, 10, 4)];
    expect(p.rank(c, ctx())[0]).toBe(0);
  });

  it("an unmeasured peer is assumed as far as the RTT prior", () => {
    // saves 200 ms of prefill, prior RTT 250 ms: stay.
    expect(p.rank([cand("A", true, 0, 0), cand("B", false, 100, undefined)], ctx())[0]).toBe(0);
  });

  it("rent or buy: a prefix expected to come back often is served locally once", () => {
    const c = [cand("A", true, 0, 0), cand("B", false, 500, 200)];
    // 1000 ms saved − 200 ms RTT = 800 ms loss if we buy; 2 future requests × 200 ms < 800: rent.
    expect(p.rank(c, ctx({ expectedReuse: 2 }))[0]).toBe(1);
    // 10 future requests × 200 ms ≥ 800: buy (serve here, cache it).
    expect(p.rank(c, ctx({ expectedReuse: 10 }))).toEqual([0]);
  });

  it("under eviction pressure, serving a prefix a peer holds is charged for what it displaces", () => {
    // Here 100 uncached tokens (100 + 200 ms); there 60 ms RTT + 80 uncached (100 + 160 ms): stay.
    const c = [cand("A", true, 900, 0), cand("B", false, 920, 60)];
    expect(p.rank(c, ctx())[0]).toBe(0);
    // Full pressure: each uncached token also evicts one: here 100 + 400 ms, there 60 + 100 + 320.
    expect(p.rank(c, ctx({ evictionPressure: 1 }))[0]).toBe(1);
    // No pressure is exactly the unpressured ranking.
    expect(p.rank(c, ctx({ evictionPressure: 0 }))).toEqual(p.rank(c, ctx()));
    // With eviction awareness off, pressure changes nothing.
    const off = createPolicy("cost-aware", { evictionAware: false });
    expect(off.rank(c, ctx({ evictionPressure: 1 }))[0]).toBe(0);
  });

  it("rent or buy counts the hits a bought prefix survives to, unless eviction awareness is off", () => {
    const c = [cand("A", true, 0, 0), cand("B", false, 500, 200)];
    // Loss 800 ms if we buy: 10 surviving hits × 200 ms buy; the flat discount (1 hit) rents.
    const x = ctx({ expectedReuse: 1, survivingReuse: 10 });
    expect(p.rank(c, x)).toEqual([0]);
    expect(createPolicy("cost-aware", { evictionAware: false }).rank(c, x)[0]).toBe(1);
  });

  it("equal replicas share the load at random instead of by RTT noise", () => {
    const c = [cand("A", true, 0, 0), cand("B", false, 500, 4.0), cand("C", false, 500, 4.1)];
    const r = new Prng(9);
    const firsts = { 1: 0, 2: 0 } as Record<number, number>;
    for (let i = 0; i < 200; i++) {
      const first = p.rank(c, ctx({ random: () => r.next() }))[0] as number;
      firsts[first] = (firsts[first] ?? 0) + 1;
    }
    expect(firsts[1]).toBeGreaterThan(60);
    expect(firsts[2]).toBeGreaterThan(60);
  });

  it("an idle peer does not pull load without a cache reason (no herding on stale depths)", () => {
    const busySelf = [cand("A", true, 100, 0, 5), cand("B", false, 100, 1, 0)];
    expect(p.rank(busySelf, ctx())[0]).toBe(0);
  });

  it("a reported queue counts as drained by its age, plus what we sent since", () => {
    // depth 2 × 300 ms reported 500 ms ago: 100 ms left; with 100 ms RTT the peer still saves 800 ms.
    const stale = { ...cand("B", false, 500, 100, 2), queueAgeMs: 500, sentSinceQueue: 0 };
    expect(p.rank([cand("A", true, 0, 0), stale], ctx())[0]).toBe(1);
    // ...but 3 forwards sent since: (2 + 3) × 300 − 500 = 1000 ms of wait: stay.
    const loaded = { ...stale, sentSinceQueue: 3 };
    expect(p.rank([cand("A", true, 0, 0), loaded], ctx())[0]).toBe(0);
  });

  it("fallback order is by expected latency, up to self", () => {
    const c = [
      cand("A", true, 0, 0),
      cand("B", false, 300, 10),
      cand("C", false, 600, 10),
      cand("D", false, 0, 10),
    ];
    const order = p.rank(c, ctx());
    expect(order.slice(0, 3)).toEqual([2, 1, 0]);
  });
});

describe("learned costs", () => {
  it("the prefill fit converges on a known linear cost model from a wrong prior", () => {
    const fit = new PrefillFit({ prefillFixedMs: 50, prefillMsPerToken: 0.5, weight: 2, rttMs: 250 }, 0.98);
    const r = new Prng(11);
    // Mostly hits (short uncached tails) with rare misses: the regime that fooled a non-decaying prior.
    for (let i = 0; i < 600; i++) {
      const x = r.next() < 0.1 ? 400 + r.int(1500) : 20 + r.int(200);
      fit.sample(x, 99 + 2.03 * x + (r.next() - 0.5) * 4);
    }
    const f = fit.fit();
    expect(f.msPerToken).toBeGreaterThan(2.03 * 0.97);
    expect(f.msPerToken).toBeLessThan(2.03 * 1.03);
    expect(Math.abs(f.fixedMs - 99)).toBeLessThan(6);
  });

  it("with no samples the prior is the answer; garbage samples are ignored", () => {
    const fit = new PrefillFit({ prefillFixedMs: 50, prefillMsPerToken: 0.5, weight: 2, rttMs: 250 }, 0.98);
    fit.sample(Number.NaN, 1);
    fit.sample(-1, 1);
    fit.sample(1, Number.POSITIVE_INFINITY);
    expect(fit.samples).toBe(0);
    expect(fit.predict(1000)).toBeCloseTo(550, 6);
  });

  it("a node learns its engine's cost model from its own runs", () => {
    const h = new Harness(["A"], { policy: "cost-aware" });
    for (let i = 0; i < 300; i++) {
      const len = 64 + ((i * 37) % 400);
      const tokens = Uint32Array.from({ length: len }, (_, k) => (k < 48 ? 1 + k : 1000 + i * 500 + k));
      h.client("A", `r${i}`, tokens);
      h.finishRuns();
    }
    const k = h.node("A").learnedCosts();
    // The harness engine's profile is the truth: overhead + slope × uncached (+ a little per cached).
    const truth = PAPER_H100_QWEN05B;
    expect(k.samples).toBe(300);
    expect(Math.abs(k.prefillMsPerToken / truth.prefillMsPerToken - 1)).toBeLessThan(0.03);
    expect(Math.abs(k.prefillFixedMs / truth.overheadMs - 1)).toBeLessThan(0.05);
  });
});

describe("prefix demand", () => {
  it("learns the arrival-weighted reuse and stays bounded", () => {
    const d = new PrefixDemand(3);
    for (let i = 0; i < 9; i++) d.record(1);
    d.record(2);
    // Σc² / Σc = (81 + 1) / 10
    expect(d.meanArrivals()).toBeCloseTo(8.2, 6);
    expect(d.expectedFuture(1)).toBeCloseTo(7.2, 6);
    for (let k = 10; k < 20; k++) d.record(k);
    expect(d.size).toBe(3);
  });
});

describe("prefix demand under eviction pressure", () => {
  it("a bought prefix survives to its next arrival by its share of arrivals and the cache turnover", () => {
    expect(survival({ pressure: 0 }, 0.01)).toBe(1);
    // Without a turnover: the flat 1 − pressure.
    expect(survival({ pressure: 0.9 }, 0.01)).toBeCloseTo(0.1, 9);
    // A key that is 1/10 of the arrivals, a cache turned over every 20 runs: 1 − e^−2.
    expect(survival({ pressure: 1, turnoverRuns: 20 }, 0.1)).toBeCloseTo(1 - Math.exp(-2), 9);
    // A rare key in the same cache is nearly always evicted first.
    expect(survival({ pressure: 1, turnoverRuns: 20 }, 0.001)).toBeLessThan(0.02);
  });

  it("a buy is worth the chain of hits its survival allows, at most its expected arrivals", () => {
    expect(hitChain(3, 1)).toBe(3);
    expect(hitChain(3, 0.5)).toBeCloseTo(0.5 + 0.25 + 0.125, 9);
    expect(hitChain(0, 0.5)).toBe(0);
    expect(hitChain(5, 0)).toBe(0);
  });

  it("arrive: a frequent key keeps its reuse in a churning cache, a rare one loses it", () => {
    const tokens = Uint32Array.from({ length: 64 }, (_, i) => i + 1);
    const other = Uint32Array.from({ length: 64 }, (_, i) => i + 1000);
    const peerHolds = [cand("A", true, 0, 0), cand("B", false, 64, 10)];
    const d = new PrefixDemand(100, { meanReuse: 8, weight: 16 });
    const churn = { pressure: 1, turnoverRuns: 10 };
    let frequent = 0;
    let rare = 0;
    for (let i = 0; i < 50; i++) {
      frequent = d.arrive(tokens, peerHolds, churn)?.surviving ?? 0;
      for (let j = 0; j < 3; j++) d.arrive(other, [cand("A", true, 0, 0)], churn);
    }
    const e = new PrefixDemand(100, { meanReuse: 8, weight: 16 });
    for (let i = 0; i < 50; i++) {
      for (let j = 0; j < 49; j++) e.arrive(other, [cand("A", true, 0, 0)], churn);
      rare = e.arrive(tokens, peerHolds, churn)?.surviving ?? 0;
    }
    expect(frequent).toBeGreaterThan(1);
    expect(rare).toBeLessThan(0.3);
    // The flat discount gives the frequent key no more than the pressure leaves: nothing.
    expect(d.arrive(tokens, peerHolds, churn)?.flat).toBe(0);
  });

  it("arrive: reports the running mean length of the prefixes held anywhere, ours included", () => {
    const long = Uint32Array.from({ length: 128 }, (_, i) => i + 1);
    const d = new PrefixDemand(100);
    const churn = { pressure: 1, turnoverRuns: 10 };
    // A 32-token prefix we hold ourselves (no buy to price) still counts towards the mean.
    for (let i = 0; i < 3; i++) d.arrive(long, [cand("A", true, 32, 0), cand("B", false, 0, 10)], churn);
    const r = d.arrive(long, [cand("A", true, 0, 0), cand("B", false, 128, 10)], churn);
    expect(r?.prefixTokens).toBeCloseTo((3 * 32 + 128) / 4, 9);
  });
});

describe("RTT echo", () => {
  it("measures a known delay from anti-entropy alone, without any forward", () => {
    const h = new Harness(["A", "B"], { policy: "cost-aware" });
    const oneWay = 37;
    // Deliver each snapshot after exactly `oneWay` ms: poll ticks every 100 ms (harness default).
    const inFlight: { at: number; to: string; from: string; msg: PeerMessage }[] = [];
    for (let t = 0; t < 1000; t++) {
      h.advance(1);
      for (const m of h.mailbox.splice(0)) inFlight.push({ at: h.now + oneWay, ...m });
      for (let i = 0; i < inFlight.length; ) {
        const m = inFlight[i] as (typeof inFlight)[number];
        if (m.at <= h.now) {
          h.input(m.to, { type: "peer-message", from: m.from, msg: m.msg });
          inFlight.splice(i, 1);
        } else i++;
      }
    }
    const rtt = h
      .node("A")
      .peers()
      .find((p) => p.id === "B")?.rttMs;
    expect(rtt).toBeDefined();
    expect(rtt as number).toBeCloseTo(2 * oneWay, 6);
    expect(h.node("A").stats().forwarded).toBe(0);
  });

  it("ignores a bogus echo (from the future, negative hold)", () => {
    const h = new Harness(["A", "B"]);
    h.now = 1000;
    // A heartbeat from B carrying only the (bogus) echo.
    const heartbeat = (echo: { t: number; heldMs: number }): PeerMessage => ({
      type: "snapshot",
      snapshot: {
        kind: "heartbeat",
        header: {
          sender: "B",
          epoch: 1,
          version: 0,
          tokenCount: 0,
          capacity: 1,
          queueDepth: 0,
          pushBackMs: 0,
        },
      },
      echo,
    });
    const bad = [heartbeat({ t: 5000, heldMs: 0 }), heartbeat({ t: 10, heldMs: -50 })];
    for (const msg of bad) h.input("A", { type: "peer-message", from: "B", msg });
    expect(h.node("A").peers()[0]?.rttMs).toBeUndefined();
  });
});
