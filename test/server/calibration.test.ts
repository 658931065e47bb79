/** Start-up calibration against the sim engine, whose cost model is known exactly. */
import pino from "pino";
import { describe, expect, it } from "vitest";
import type { Engine, EngineInfo, EngineResult, Tokens } from "../../src/core/engine.js";
import { PrefixNode } from "../../src/core/node/node.js";
import { CPU_LLAMACPP, PAPER_H100_QWEN05B } from "../../src/engines/sim/profiles.js";
import { SimEngine } from "../../src/engines/sim/sim-engine.js";
import { calibrateEngine, RESET_WAIT_MS } from "../../src/server/runtime/calibration.js";
import { startNode } from "../../src/server/runtime/start-node.js";
import { resolveNodeSettings } from "../../src/server/settings/index.js";

const instant = async () => {};

/** What a loaded machine may add to a deadline before the timer fires (generous: shared cores). */
const SLACK_MS = 2_000;

/**
 * A TEST DOUBLE engine (engine-managed, like llama-server's slots): every run is slower than any
 * budget here (it ends only when aborted), and its cache reset ends at once or never, as told.
 */
class SlowRunsDouble implements Engine {
  readonly info: EngineInfo = {
    kind: "slow-runs-double",
    model: "m",
    capacityTokens: 10_000,
    cacheMode: "engine-managed",
    maxContextTokens: 4096,
    needsPromptText: false,
    abortable: true,
  };
  readonly runSignals: AbortSignal[] = [];
  resets = 0;
  constructor(private readonly reset: "ends" | "hangs") {}
  async tokenize(text: string): Promise<Tokens> {
    return Uint32Array.from(text.split(" "), (_, i) => i + 1);
  }
  async applyChatTemplate(): Promise<string> {
    return "";
  }
  run(_req: unknown, _onChunk: unknown, signal?: AbortSignal): Promise<EngineResult> {
    if (signal) this.runSignals.push(signal);
    return new Promise<EngineResult>((_, reject) =>
      signal?.addEventListener("abort", () => reject(new Error("aborted")), { once: true }),
    );
  }
  resetCache(): Promise<void> {
    this.resets++;
    return this.reset === "ends" ? Promise.resolve() : new Promise<void>(() => {});
  }
  async health() {
    return { ok: true };
  }
  async close() {}
}

describe("start-up calibration", () => {
  for (const profile of [PAPER_H100_QWEN05B, CPU_LLAMACPP]) {
    it(`recovers the ${profile.name} engine's four costs and leaves its cache empty`, async () => {
      const engine = new SimEngine({ profile, sleep: instant });
      const c = await calibrateEngine(engine, { budgetMs: 60_000 });
      expect(c.stopped).toBeUndefined();
      expect(c.samples).toHaveLength(6);
      // The third run of each round reuses the first's prompt: its prefix is cached.
      expect(c.samples[2]?.cached).toBeGreaterThan(200);
      expect(c.samples[0]?.cached).toBe(0);
      expect(engine.cache.size).toBe(0);

      const node = new PrefixNode(
        { id: "a", capacityTokens: 10_000, advertiseCosts: true },
        { now: () => 0, random: () => 0.5 },
      );
      expect(node.engineCosts()).toBeUndefined();
      node.calibrate(c.samples);
      const k = node.engineCosts();
      expect(k?.fixedMs).toBeCloseTo(profile.overheadMs, 1);
      expect(k?.msPerUncached).toBeCloseTo(profile.prefillMsPerToken, 3);
      expect(k?.msPerCached).toBeCloseTo(profile.cachedMsPerToken, 2);
      expect(k?.msPerOutput).toBeCloseTo(profile.decodeMsPerToken, 6);
      // Routing's own fit takes the calibration too (no longer the 50 ms + 0.5 ms/token prior).
      expect(node.learnedCosts().prefillMsPerToken).toBeGreaterThan(1);
    });
  }

  it("is bounded: a run past the budget is aborted and the rest is skipped", async () => {
    // Real timers, 10 ms of budget, each run modelled at ≥ 99 ms.
    const engine = new SimEngine({ profile: PAPER_H100_QWEN05B });
    const t0 = performance.now();
    const c = await calibrateEngine(engine, { budgetMs: 10 });
    expect(performance.now() - t0).toBeLessThan(5_000);
    expect(c.stopped).toBe("budget");
    expect(c.samples).toHaveLength(0);
    expect(engine.cache.size).toBe(0);
  });

  it("takes a budget of a fraction of a millisecond (the setting allows one)", async () => {
    const engine = new SimEngine({ profile: PAPER_H100_QWEN05B });
    const c = await calibrateEngine(engine, { budgetMs: 10.5 });
    expect(c.stopped).toBe("budget");
    expect(engine.cache.size).toBe(0);
  });

  it("is bounded even by an engine that ignores the abort (wedged)", async () => {
    class Wedged extends SimEngine {
      override run(): Promise<never> {
        return new Promise<never>(() => {});
      }
    }
    const c = await calibrateEngine(new Wedged({ profile: PAPER_H100_QWEN05B }), { budgetMs: 50 });
    expect(c.stopped).toBe("budget");
    expect(c.samples).toHaveLength(0);
  });

  it("a run slower than the budget is aborted at it: no run, the cache reset, within the budget", async () => {
    const engine = new SlowRunsDouble("ends");
    const budgetMs = 300;
    const t0 = performance.now();
    const c = await calibrateEngine(engine, { budgetMs });
    const took = performance.now() - t0;
    expect(took).toBeGreaterThanOrEqual(budgetMs - 5);
    expect(took).toBeLessThan(budgetMs + SLACK_MS);
    expect(c).toMatchObject({ samples: [], stopped: "budget" });
    expect(c.reset).toBeUndefined();
    // The one run started was told to stop, and what it may have cached was reset.
    expect(engine.runSignals).toHaveLength(1);
    expect(engine.runSignals[0]?.aborted).toBe(true);
    expect(engine.resets).toBe(1);
  });

  it("a cache reset that never ends holds calibration up RESET_WAIT_MS past the budget at most", async () => {
    const engine = new SlowRunsDouble("hangs");
    const budgetMs = 200;
    const t0 = performance.now();
    const c = await calibrateEngine(engine, { budgetMs });
    expect(performance.now() - t0).toBeLessThan(budgetMs + RESET_WAIT_MS + SLACK_MS);
    expect(c).toMatchObject({ samples: [], stopped: "budget", reset: "pending" });
  });

  it("a tokenize outlasting the budget (a stalled server) is aborted and abandoned at it", async () => {
    const signals: (AbortSignal | undefined)[] = [];
    class StalledTokenize extends SimEngine {
      override tokenize(_text: string, signal?: AbortSignal): Promise<Tokens> {
        signals.push(signal);
        return new Promise<Tokens>(() => {}); // ignores the abort too
      }
    }
    const engine = new StalledTokenize({ profile: PAPER_H100_QWEN05B, sleep: instant });
    const budgetMs = 300;
    const t0 = performance.now();
    const c = await calibrateEngine(engine, { budgetMs });
    expect(performance.now() - t0).toBeLessThan(budgetMs + SLACK_MS);
    expect(c).toMatchObject({ samples: [], stopped: "budget" });
    expect(signals).toHaveLength(1);
    expect(signals[0]?.aborted).toBe(true);
    // No run was made, so there was nothing to free.
    expect(engine.cache.size).toBe(0);
  });

  it("off at 0 ms: no run at all", async () => {
    const engine = new SimEngine({ profile: PAPER_H100_QWEN05B, sleep: instant });
    const c = await calibrateEngine(engine, { budgetMs: 0 });
    expect(c).toEqual({ samples: [], ms: 0, stopped: "disabled" });
  });

  it("a node whose budget ends before any run says so, keeping the default cost model", async () => {
    const lines: Record<string, unknown>[] = [];
    const logger = pino({ level: "info" }, { write: (l: string) => lines.push(JSON.parse(l)) });
    const budgetMs = 300;
    const settings = resolveNodeSettings(
      { id: "A", engine: "sim", listen: "127.0.0.1:0", peerListen: "127.0.0.1:0", calibrationMs: budgetMs },
      {},
    );
    const t0 = performance.now();
    const node = await startNode(settings, { logger, engine: new SlowRunsDouble("ends") });
    try {
      expect(performance.now() - t0).toBeLessThan(budgetMs + SLACK_MS + 5_000);
      const line = lines.find((l) => String(l.msg).startsWith("engine not calibrated"));
      expect(line).toMatchObject({ level: 40, runs: 0, stopped: "budget", budgetMs });
      expect(String(line?.msg)).toMatch(/--calibration-ms .*default cost model/);
      // No fit stands on data: the node advertises no measured costs.
      expect(line?.costs).toBeUndefined();
      expect(lines.some((l) => l.msg === "engine calibrated")).toBe(false);
    } finally {
      await node.stop();
    }
  });
});
