/** Simulator building blocks: event order, network faults, the engine's cache and cost model. */

import { describe, expect, it } from "vitest";
import { Prng } from "../../src/core/prng.js";
import { EngineAbortedError } from "../../src/engines/errors.js";
import { engineCost, simOutput } from "../../src/engines/sim/cost.js";
import { KvCache } from "../../src/engines/sim/kv-cache.js";
import { PAPER_H100_QWEN05B } from "../../src/engines/sim/profiles.js";
import { keptOnAbort, SimEngine } from "../../src/engines/sim/sim-engine.js";
import { EventQueue, type SimEvent } from "../../src/sim/event-queue.js";
import { SimNetwork } from "../../src/sim/network.js";

describe("EventQueue", () => {
  it("pops by time, then by insertion order", () => {
    const q = new EventQueue<SimEvent & { name: string }>();
    const rng = new Prng(1);
    const want: [number, number][] = [];
    for (let i = 0; i < 2_000; i++) {
      const at = rng.int(50);
      q.push({ at, name: String(i) });
      want.push([at, i]);
    }
    want.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    const got: [number, number][] = [];
    for (let e = q.pop(); e; e = q.pop()) got.push([e.at, Number(e.name)]);
    expect(got).toEqual(want);
  });
});

describe("Prng", () => {
  it("replays by seed and differs across seeds", () => {
    const draws = (seed: number) => {
      const r = new Prng(seed);
      return Array.from({ length: 5 }, () => r.nextUint32());
    };
    const a = draws(42);
    const b = draws(42);
    const c = draws(43);
    expect(a).toEqual(b);
    expect(a).not.toEqual(c);
    const r = new Prng(9);
    let sum = 0;
    for (let i = 0; i < 10_000; i++) sum += r.next();
    expect(sum / 10_000).toBeGreaterThan(0.48);
    expect(sum / 10_000).toBeLessThan(0.52);
  });
});

describe("SimNetwork", () => {
  it("delays by Δcomm ± jitter, drops across a partition only while it lasts", () => {
    const net = new SimNetwork(new Prng(1), 2, 0.5, {
      partitions: [{ startMs: 10, endMs: 20, groups: [[0], [1, 2]] }],
    });
    const buf = [0, 0];
    for (let i = 0; i < 100; i++) {
      expect(net.delays(0, 0, 1, buf)).toBe(1);
      expect(buf[0]).toBeGreaterThanOrEqual(1.5);
      expect(buf[0]).toBeLessThanOrEqual(2.5);
    }
    expect(net.delays(15, 0, 1, buf)).toBe(0);
    expect(net.delays(15, 1, 2, buf)).toBe(1);
    expect(net.delays(20, 0, 1, buf)).toBe(1);
  });

  it("loses and duplicates at the configured rates, and stops at untilMs", () => {
    const net = new SimNetwork(new Prng(2), 1, 0, { lossProb: 0.3, dupProb: 0.2, untilMs: 1000 });
    const buf = [0, 0];
    let lost = 0;
    let dup = 0;
    for (let i = 0; i < 10_000; i++) {
      const n = net.delays(0, 0, 1, buf);
      if (n === 0) lost++;
      if (n === 2) dup++;
    }
    expect(lost / 10_000).toBeCloseTo(0.3, 1);
    expect(dup / 7_000).toBeCloseTo(0.2, 1);
    for (let i = 0; i < 1_000; i++) expect(net.delays(1000, 0, 1, buf)).toBe(1);
  });
});

describe("KvCache", () => {
  it("matches, splits and frees evicted runs exactly", () => {
    const kv = new KvCache();
    kv.insert(Uint32Array.from([1, 2, 3, 4]));
    kv.insert(Uint32Array.from([1, 2, 9]));
    expect(kv.size).toBe(5);
    expect(kv.match(Uint32Array.from([1, 2, 3, 7]))).toBe(3);
    expect(kv.remove({ path: Uint32Array.from([1, 2, 3, 4]), keep: 3 })).toBe(1);
    expect(kv.match(Uint32Array.from([1, 2, 3, 4]))).toBe(3);
    expect(kv.remove({ path: Uint32Array.from([1, 2, 3]), keep: 2 })).toBe(1);
    expect(kv.size).toBe(3);
    expect(kv.sequences().map((s) => [...s])).toEqual([[1, 2, 9]]);
  });
});

describe("SimEngine", () => {
  it("costs overhead + prefill per uncached token + decode; output depends only on the prompt", () => {
    const p = PAPER_H100_QWEN05B;
    const c = engineCost(p, 100, 60, 2);
    expect(c.prefillMs).toBeCloseTo(p.overheadMs + 40 * p.prefillMsPerToken + 60 * p.cachedMsPerToken);
    expect(c.decodeMs).toBeCloseTo(2 * p.decodeMsPerToken);
    const t = Uint32Array.from([5, 6, 7]);
    expect(simOutput(t, 1)).toMatch(/^[ABCD]$/);
    expect(simOutput(t, 3)).toBe(simOutput(Uint32Array.from([5, 6, 7]), 3));
  });

  it("implements the Engine port: run waits the modelled time (injected sleep) and caches the prompt", async () => {
    const slept: number[] = [];
    const e = new SimEngine({
      profile: PAPER_H100_QWEN05B,
      capacityTokens: 1_000,
      sleep: async (ms) => {
        slept.push(ms);
      },
    });
    expect(e.info.cacheMode).toBe("node-managed");
    const tokens = await e.tokenize("the same words the same words");
    expect(tokens.length).toBe(6);
    const chunks: string[] = [];
    const r1 = await e.run({ id: "a", tokens, maxTokens: 1 }, (c) => chunks.push(c.text));
    const r2 = await e.run({ id: "b", tokens, maxTokens: 1 });
    expect(r1.cachedTokens).toBe(0);
    expect(r2.cachedTokens).toBe(6);
    expect(r2.prefillMs).toBeLessThan(r1.prefillMs);
    // The prefill, then the decode (an abort between them keeps the prompt).
    expect(slept.slice(0, 2)).toEqual([r1.prefillMs, r1.decodeMs]);
    expect(chunks).toEqual([r1.text]);
    e.evict([{ path: tokens, keep: 0 }]);
    expect(e.cache.size).toBe(0);
    expect((await e.health()).ok).toBe(true);
  });

  it("reports the times that passed when time-scaled (the daemon's --sim-time-scale)", async () => {
    const slept: number[] = [];
    const sleep = async (ms: number) => void slept.push(ms);
    const scaled = new SimEngine({ profile: PAPER_H100_QWEN05B, timeScale: 0.01, sleep });
    const real = new SimEngine({ profile: PAPER_H100_QWEN05B, sleep });
    const tokens = Uint32Array.from({ length: 500 }, (_, i) => i);
    const a = await scaled.run({ id: "a", tokens, maxTokens: 4 });
    const b = await real.run({ id: "b", tokens, maxTokens: 4 });
    expect(a.prefillMs).toBeCloseTo(b.prefillMs * 0.01);
    expect(a.decodeMs).toBeCloseTo(b.decodeMs * 0.01);
    expect(a.prefillMs + a.decodeMs).toBeCloseTo((slept[0] as number) + (slept[1] as number));
    expect(a.text).toBe(b.text);
  });

  it("an aborted run keeps what its prefill got through: the cached prefix and that share of the rest", () => {
    expect(keptOnAbort(10, 50, 0)).toBe(10);
    expect(keptOnAbort(10, 50, 0.5)).toBe(30);
    expect(keptOnAbort(10, 50, 1)).toBe(50);
    expect(keptOnAbort(10, 50, 7)).toBe(50);
    expect(keptOnAbort(50, 50, 0.5)).toBe(50);
  });

  it("an aborted run keeps its whole prompt once prefilled, and says so (keptTokens)", async () => {
    // A sleep that parks until the test aborts it, on the `stall`th call.
    const engineAborting = (stall: number) => {
      let calls = 0;
      return new SimEngine({
        profile: PAPER_H100_QWEN05B,
        capacityTokens: 1_000,
        // A frozen clock: the prefill's progress at the abort is what the stall says, not how long
        // a busy machine took between the run's start and the abort.
        now: () => 0,
        sleep: (_ms, signal) =>
          ++calls < stall
            ? Promise.resolve()
            : new Promise((_, reject) => {
                if (signal?.aborted) reject(signal.reason);
                signal?.addEventListener("abort", () => reject(signal.reason));
              }),
      });
    };
    const tokens = Uint32Array.from({ length: 50 }, (_, i) => i);
    for (const [stall, kept] of [
      [1, 0], // aborted as its prefill starts: nothing cached
      [2, 50], // aborted in its decode: the prompt stays
    ] as const) {
      const e = engineAborting(stall);
      const ctl = new AbortController();
      const run = e.run({ id: "a", tokens, maxTokens: 4 }, undefined, ctl.signal);
      ctl.abort();
      const err = await run.catch((x: unknown) => x);
      expect(err).toBeInstanceOf(EngineAbortedError);
      expect((err as EngineAbortedError).keptTokens).toBe(kept);
      expect(e.cache.size).toBe(kept);
    }
  });
});
