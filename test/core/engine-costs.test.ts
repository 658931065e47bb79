/** The engine cost model: its fit, its place in the snapshot header, and what routing makes of it. */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { BLOCK_SIZE } from "../../src/core/block-hash.js";
import { EngineCostFit, predictRunMs, stampCosts } from "../../src/core/node/engine-costs.js";
import { type Candidate, createPolicy, type RoutingContext } from "../../src/core/node/policies/index.js";
import type { Effect } from "../../src/core/node/types.js";
import type { EngineCosts, Snapshot, SnapshotHeader } from "../../src/core/snapshot.js";
import {
  decodeSnapshot,
  encodedSize,
  encodeSnapshot,
  SnapshotDecodeError,
} from "../../src/core/snapshot-codec.js";

const prior = { prefillFixedMs: 50, prefillMsPerToken: 0.5, weight: 2, rttMs: 250 };

describe("engine cost fit", () => {
  it("with its prior, a handful of runs moves it only part way (why calibration drops the prior)", () => {
    const fit = new EngineCostFit(prior, 0.98);
    for (const n of [32, 256])
      fit.sample({ uncached: n, cached: 0, prefillMs: 5 + 0.05 * n, outputTokens: 1, decodeMs: 1 });
    expect(fit.costs().msPerUncached).toBeGreaterThan(0.1);
    const dropped = new EngineCostFit(prior, 0.98);
    dropped.dropPrior();
    for (const n of [32, 256])
      dropped.sample({ uncached: n, cached: 0, prefillMs: 5 + 0.05 * n, outputTokens: 1, decodeMs: 1 });
    expect(dropped.costs().msPerUncached).toBeCloseTo(0.05, 3);
    expect(dropped.costs().fixedMs).toBeCloseTo(5, 1);
  });

  it("stands on data only after calibration or 16 runs", () => {
    const run = { uncached: 10, cached: 0, prefillMs: 20, outputTokens: 1, decodeMs: 1 };
    const fit = new EngineCostFit(prior, 0.98);
    for (let i = 0; i < 15; i++) fit.sample(run);
    expect(fit.measured).toBe(false);
    fit.sample(run);
    expect(fit.measured).toBe(true);
    const cal = new EngineCostFit(prior, 0.98);
    expect(cal.measured).toBe(false);
    cal.dropPrior();
    cal.sample(run);
    expect(cal.measured).toBe(true);
  });

  it("is the prior before any sample", () => {
    const c = new EngineCostFit(prior, 0.98).costs();
    expect(c.fixedMs).toBeCloseTo(50, 6);
    expect(c.msPerUncached).toBeCloseTo(0.5, 6);
    expect(c.msPerCached).toBeCloseTo(0, 6);
    expect(c.msPerOutput).toBe(0);
  });

  it("recovers any true costs from a calibration-shaped run set (property)", () => {
    const arb = fc.record({
      fixed: fc.double({ min: 0, max: 500, noNaN: true }),
      u: fc.double({ min: 0.001, max: 20, noNaN: true }),
      c: fc.double({ min: 0, max: 0.5, noNaN: true }),
      o: fc.double({ min: 0.1, max: 200, noNaN: true }),
    });
    fc.assert(
      fc.property(arb, ({ fixed, u, c, o }) => {
        const fit = new EngineCostFit(prior, 0.98);
        fit.dropPrior();
        // Two cold lengths and a warm repeat: what the start-up calibration runs.
        for (let k = 0; k < 2; k++) {
          for (const [unc, cac] of [
            [32, 0],
            [256, 0],
            [16, 256],
          ] as const) {
            fit.sample({
              uncached: unc,
              cached: cac,
              prefillMs: fixed + u * unc + c * cac,
              outputTokens: 8,
              decodeMs: 8 * o,
            });
          }
        }
        const got = fit.costs();
        // Only the prior's non-decaying floor (weight 1e-3) pulls the fit off the truth.
        expect(Math.abs(got.fixedMs - fixed)).toBeLessThan(0.05 + 0.001 * fixed);
        expect(Math.abs(got.msPerUncached - u)).toBeLessThan(0.005 + 0.01 * u);
        expect(Math.abs(got.msPerCached - c)).toBeLessThan(0.005 + 0.01 * (c + u));
        expect(got.msPerOutput).toBeCloseTo(o, 6);
      }),
      { numRuns: 200 },
    );
  });

  it("clamps a negative slope to 0 and ignores nonsense samples", () => {
    const fit = new EngineCostFit(prior, 0.9);
    // Cached tokens that look like they make runs faster: noise, never a negative cost.
    for (let k = 0; k < 50; k++) {
      fit.sample({ uncached: 100, cached: 0, prefillMs: 100, outputTokens: 1, decodeMs: 1 });
      fit.sample({ uncached: 100, cached: 500, prefillMs: 60, outputTokens: 1, decodeMs: 1 });
      fit.sample({ uncached: 10, cached: 0, prefillMs: 55, outputTokens: 1, decodeMs: 1 });
    }
    fit.sample({ uncached: Number.NaN, cached: 0, prefillMs: 1e9, outputTokens: 1, decodeMs: 1 });
    fit.sample({ uncached: 1, cached: -1, prefillMs: 1e9, outputTokens: 1, decodeMs: 1 });
    const c = fit.costs();
    expect(c.msPerCached).toBe(0);
    expect(c.msPerUncached).toBeGreaterThan(0);
    expect(c.fixedMs).toBeGreaterThan(0);
    expect(fit.samples).toBe(150);
  });

  it("follows a machine that became slower (decayed memory)", () => {
    const fit = new EngineCostFit(prior, 0.9);
    const run = (scale: number) => {
      for (const n of [50, 400])
        fit.sample({
          uncached: n,
          cached: 0,
          prefillMs: scale * (10 + n),
          outputTokens: 4,
          decodeMs: scale * 40,
        });
    };
    for (let k = 0; k < 50; k++) run(1);
    expect(fit.costs().msPerUncached).toBeCloseTo(1, 1);
    for (let k = 0; k < 50; k++) run(3);
    expect(fit.costs().msPerUncached).toBeCloseTo(3, 1);
    expect(fit.costs().msPerOutput).toBeCloseTo(30, 0);
  });
});

const header: SnapshotHeader = {
  sender: "node-a",
  epoch: 7,
  version: 3,
  tokenCount: 100,
  capacity: 1000,
  queueDepth: 2,
  pushBackMs: 0,
};
const costs: EngineCosts = { fixedMs: 12.5, msPerUncached: 0.031, msPerCached: 0.0004, msPerOutput: 9.25 };

describe("snapshot header costs", () => {
  it("round-trip to the nanosecond, and encodedSize stays exact", () => {
    for (const s of [
      { kind: "heartbeat", header: { ...header, costs } },
      {
        kind: "full",
        header: { ...header, costs },
        body: { blockSize: BLOCK_SIZE, keys: Float64Array.of(1, 2) },
      },
    ] as Snapshot[]) {
      const bytes = encodeSnapshot(s);
      expect(bytes.length).toBe(encodedSize(s));
      const back = decodeSnapshot(bytes);
      expect(back.header.costs).toEqual(costs);
      expect(back.kind).toBe(s.kind);
    }
  });

  it("a header without costs encodes exactly as before (flags 0) and decodes without the field", () => {
    const bytes = encodeSnapshot({ kind: "heartbeat", header });
    expect(bytes[7]).toBe(0);
    expect(decodeSnapshot(bytes).header).toEqual(header);
    expect(bytes.length + 4).toBeLessThan(encodedSize({ kind: "heartbeat", header: { ...header, costs } }));
  });

  it("rejects unknown flags and out-of-range costs with the codec's own error", () => {
    const bytes = encodeSnapshot({ kind: "heartbeat", header });
    const flagged = bytes.slice();
    flagged[7] = 2;
    expect(() => decodeSnapshot(flagged)).toThrow(SnapshotDecodeError);
    expect(() =>
      encodeSnapshot({ kind: "heartbeat", header: { ...header, costs: { ...costs, fixedMs: -1 } } }),
    ).toThrow(RangeError);
    expect(() =>
      encodeSnapshot({
        kind: "heartbeat",
        header: { ...header, costs: { ...costs, msPerOutput: Number.NaN } },
      }),
    ).toThrow(RangeError);
  });

  it("stampCosts copies each shared snapshot once and leaves other messages alone", () => {
    const snap: Snapshot = { kind: "heartbeat", header };
    const out: Effect[] = [
      { type: "send", to: "b", msg: { type: "snapshot", snapshot: snap } },
      { type: "send", to: "c", msg: { type: "snapshot", snapshot: snap } },
      { type: "send", to: "c", msg: { type: "goodbye" } },
    ];
    stampCosts(out, costs);
    const sent = out.map((e) =>
      e.type === "send" && e.msg.type === "snapshot" ? e.msg.snapshot : undefined,
    );
    expect(sent[0]?.header.costs).toEqual(costs);
    expect(sent[0]).toBe(sent[1]);
    expect(snap.header.costs).toBeUndefined();
    expect(sent[2]).toBeUndefined();
  });

  it("stampCosts puts them on gossip states of our own tree only, and relays keep the owner's", () => {
    const own: Snapshot = { kind: "heartbeat", header };
    const theirs: Snapshot = {
      kind: "heartbeat",
      header: { ...header, sender: "c", costs: { ...costs, fixedMs: 99 } },
    };
    const states = (ss: Snapshot[]): Effect => ({
      type: "mesh-send",
      to: "b",
      msg: {
        channel: "gossip",
        msg: { type: "states", states: ss.map((s) => ({ snapshot: s, blocks: 0 })), wants: [] },
      },
    });
    const out: Effect[] = [states([own, theirs]), states([theirs])];
    stampCosts(out, costs, header.sender);
    const sent = out.map((e) =>
      e.type === "mesh-send" && e.msg.channel === "gossip" && e.msg.msg.type === "states"
        ? e.msg.msg.states.map((s) => s.snapshot)
        : [],
    );
    expect(sent[0]?.[0]?.header.costs).toEqual(costs);
    expect(sent[0]?.[1]).toBe(theirs);
    expect(sent[1]?.[0]).toBe(theirs);
    expect(own.header.costs).toBeUndefined();
  });
});

describe("routing by advertised costs", () => {
  const ours: EngineCosts = { fixedMs: 20, msPerUncached: 0.5, msPerCached: 0, msPerOutput: 10 };
  const learned = { prefillFixedMs: 20, prefillMsPerToken: 0.5, serviceMs: 0, rttPriorMs: 250, samples: 100 };
  const ctx = (promptTokens: number, engine?: EngineCosts): RoutingContext => ({
    promptTokens,
    now: 0,
    random: () => 0.5,
    costs: engine ? { ...learned, engine } : learned,
  });
  const self: Candidate = {
    id: "s",
    self: true,
    estimatedMatch: 0,
    estimateAgeMs: 0,
    queueDepth: 0,
    rttMs: 0,
    capacityTokens: 1e4,
  };
  const peer = (match: number, adv?: EngineCosts): Candidate => ({
    id: "p",
    self: false,
    estimatedMatch: match,
    estimateAgeMs: 0,
    queueDepth: 0,
    rttMs: 2,
    capacityTokens: 1e4,
    ...(adv ? { advertisedCosts: adv } : {}),
  });
  const slow3: EngineCosts = { fixedMs: 60, msPerUncached: 1.5, msPerCached: 0, msPerOutput: 30 };
  const policy = createPolicy("cost-aware", { rentOrBuy: false });

  it("a peer 3× slower is chosen only when its cache saves more than its slowness costs", () => {
    // Prompt 1,000 tokens; self 20 + 500 = 520 ms. Peer holding 900: 3 × 70 + 2 = 212 ms → forward.
    expect(predictRunMs(slow3, 100, 900)).toBeCloseTo(210, 9);
    expect(policy.rank([self, peer(900, slow3)], ctx(1_000, ours))[0]).toBe(1);
    // Peer holding 400: 3 × 320 + 2 = 962 ms > 520 → stay here.
    expect(policy.rank([self, peer(400, slow3)], ctx(1_000, ours))[0]).toBe(0);
    // Without costs on both sides, every peer is taken for as fast as we are (322 ms: forward).
    expect(policy.rank([self, peer(400, slow3)], ctx(1_000))[0]).toBe(1);
    expect(policy.rank([self, peer(400)], ctx(1_000, ours))[0]).toBe(1);
  });

  it("a faster peer draws requests it would not win on cache alone", () => {
    const fast: EngineCosts = { fixedMs: 5, msPerUncached: 0.1, msPerCached: 0, msPerOutput: 2 };
    // No cache anywhere: self 520 ms, peer 5 + 100 + 2 = 107 ms.
    expect(policy.rank([self, peer(0, fast)], ctx(1_000, ours))[0]).toBe(1);
    expect(policy.rank([self, peer(0)], ctx(1_000, ours))[0]).toBe(0);
  });
});
