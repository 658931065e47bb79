/**
 * Start-up calibration: before a node says it is ready, a few short runs measure its engine's costs
 * (engine-costs.ts: fixed, per uncached, per cached and per output token), so cost-aware routing and
 * the costs it advertises start from this machine instead of the configured prior. A cold node
 * otherwise recomputes prompts a peer holds (it believes its prefill cheap until its own runs say
 * otherwise) exactly when routing matters most.
 *
 * The runs: a long and a short prompt, each cold (a fresh nonce first, so nothing is cached), then the
 * long one again (its prefix now cached), `OUTPUT_TOKENS` tokens out each; two rounds while the budget
 * lasts. The budget is a deadline, not a check between runs: every wait on the engine (a tokenize, a
 * run and what the engine does inside it, e.g. a slot read-back) is given the deadline's signal, so a
 * remote engine's request is aborted at `budgetMs`, and the wait ends then even when the engine
 * ignores the abort (a stalled server). A run cut off loses its sample; the others stand. Afterwards
 * what the runs cached is freed (node-managed caches: `evict`; engine-managed: `resetCache`), so the
 * node's tree and its engine agree again; the reset is waited for at most `RESET_WAIT_MS` past the
 * budget (it stays queued ahead of any later run: the Engine contract).
 * Works with any Engine: the sim engine, embedded llama.cpp, remote servers (text prompts).
 */

import type { Logger } from "pino";
import type { Engine, EngineRequest, EngineResult, EvictedRun } from "../../core/engine.js";
import type { CostSample } from "../../core/node/engine-costs.js";
import type { PrefixNode } from "../../core/node/node.js";
import { raceTimeout } from "../../net/time-bound.js";

export interface CalibrationOptions {
  /** Longest the whole calibration may take, ms (0: none is run); the cache reset may add RESET_WAIT_MS. */
  budgetMs: number;
  /** Rounds of three runs (each round adds a sample per shape). */
  rounds?: number;
  now?: () => number;
}

export interface Calibration {
  /** One per completed run. */
  samples: CostSample[];
  /** Wall time calibration took, ms (the cache reset included). */
  ms: number;
  /** Why it stopped before every planned run ("budget", an engine error); undefined if complete. */
  stopped?: string;
  /**
   * The runs' cache reset (engine-managed caches): "pending" when it had not ended within
   * RESET_WAIT_MS past the budget (it still runs, ahead of any later run), "failed" when it threw.
   */
  reset?: "pending" | "failed";
}

/** How long past the budget calibration waits for the engine to free what its runs cached. */
export const RESET_WAIT_MS = 1_000;

const OUTPUT_TOKENS = 8;
const LONG_WORDS = 256;
const SHORT_WORDS = 24;

export async function calibrateEngine(engine: Engine, o: CalibrationOptions): Promise<Calibration> {
  const now = o.now ?? (() => performance.now());
  const start = now();
  const samples: CostSample[] = [];
  if (!(o.budgetMs > 0)) return { samples, ms: 0, stopped: "disabled" };
  const end = start + o.budgetMs;
  const deadline = new Deadline(o.budgetMs);
  const made: EngineRequest[] = [];
  let stopped: string | undefined;
  try {
    const rounds = o.rounds ?? 2;
    for (let r = 0; r < rounds && stopped === undefined; r++) {
      const long = await prompt(engine, `r${r}l`, LONG_WORDS, deadline);
      const short = long && (await prompt(engine, `r${r}s`, SHORT_WORDS, deadline));
      if (!long || !short) {
        stopped = "budget";
        break;
      }
      for (const req of [long, short, long]) {
        if (deadline.passed) {
          stopped = "budget";
          break;
        }
        made.push(req);
        const res = await deadline.within((signal) => engine.run(req, undefined, signal));
        if (res === undefined) {
          stopped = "budget";
          break;
        }
        samples.push(sampleOf(req, res));
      }
    }
  } catch (err) {
    stopped = `engine: ${(err as Error).message}`;
  }
  const reset = await forget(engine, made, Math.max(RESET_WAIT_MS, end - now()));
  return {
    samples,
    ms: now() - start,
    ...(stopped === undefined ? {} : { stopped }),
    ...(reset === undefined ? {} : { reset }),
  };
}

/**
 * The budget as a deadline: its signal aborts what is in flight when it passes, and `within` stops
 * waiting then, whatever the engine does with the abort.
 */
class Deadline {
  readonly signal: AbortSignal;
  private readonly expired: Promise<undefined>;

  constructor(ms: number) {
    // AbortSignal.timeout takes whole milliseconds only; the setting allows a fraction.
    this.signal = AbortSignal.timeout(Math.ceil(ms));
    this.expired = new Promise<undefined>((resolve) =>
      this.signal.addEventListener("abort", () => resolve(undefined), { once: true }),
    );
  }

  get passed(): boolean {
    return this.signal.aborted;
  }

  /** `work`'s result, or undefined when the deadline passed first (its abort is then not an error). */
  async within<T>(work: (signal: AbortSignal) => Promise<T>): Promise<T | undefined> {
    if (this.passed) return undefined;
    const done = work(this.signal).catch((err: unknown) => {
      if (this.signal.aborted) return undefined;
      throw err;
    });
    return await Promise.race([done, this.expired]);
  }
}

/**
 * A prompt no cache holds yet (a fresh nonce first), of about `words` words, fitting the context;
 * undefined when the deadline passed while the engine tokenized it.
 */
async function prompt(
  engine: Engine,
  tag: string,
  words: number,
  deadline: Deadline,
): Promise<EngineRequest | undefined> {
  const nonce = `calibration-${tag}-${Math.random().toString(36).slice(2, 10)}`;
  const room = Math.max(8, engine.info.maxContextTokens - OUTPUT_TOKENS - 8);
  let n = words;
  for (;;) {
    const text = `${nonce} ${Array.from({ length: n }, (_, i) => `w${i.toString(36)}`).join(" ")}`;
    const tokens = await deadline.within((signal) => engine.tokenize(text, signal));
    if (tokens === undefined) return undefined;
    if (tokens.length <= room || n <= 1) {
      return { id: nonce, tokens, prompt: text, maxTokens: OUTPUT_TOKENS, temperature: 0 };
    }
    n = Math.max(1, Math.floor((n * room) / tokens.length / 1.1));
  }
}

function sampleOf(req: EngineRequest, r: EngineResult): CostSample {
  const cached = Math.min(r.cachedTokens, req.tokens.length);
  return {
    uncached: req.tokens.length - cached,
    cached,
    prefillMs: r.prefillMs,
    outputTokens: r.completionTokens,
    decodeMs: r.decodeMs,
  };
}

/**
 * Frees what the calibration runs cached (the node's tree never held it), also after a run cut off
 * by the deadline: an engine-managed reset is waited for `waitMs` at most.
 */
async function forget(
  engine: Engine,
  made: readonly EngineRequest[],
  waitMs: number,
): Promise<Calibration["reset"]> {
  if (made.length === 0) return undefined;
  if (engine.info.cacheMode === "engine-managed") {
    if (!engine.resetCache) return undefined;
    const reset = Promise.resolve()
      .then(() => engine.resetCache?.())
      .then(
        () => undefined,
        () => "failed" as const,
      );
    return await raceTimeout(reset, waitMs, () => "pending" as const);
  }
  const runs: EvictedRun[] = [...new Set(made)].map((r) => ({ path: r.tokens, keep: 0 }));
  engine.evict?.(runs);
  return undefined;
}

/** Start-up calibration (calibration.ts), before the node is ready: never fatal, always bounded. */
export async function calibrateAtStart(
  engine: Engine,
  node: PrefixNode,
  budgetMs: number,
  logger: Logger,
): Promise<void> {
  if (!(budgetMs > 0)) return;
  const c = await calibrateEngine(engine, { budgetMs });
  node.calibrate(c.samples);
  const fields = {
    runs: c.samples.length,
    ms: Math.round(c.ms),
    budgetMs,
    stopped: c.stopped,
    reset: c.reset,
    costs: node.engineCosts(),
  };
  // Without a run the configured prior stands: say so, or the costs routing uses look measured.
  if (c.samples.length === 0)
    logger.warn(
      fields,
      c.stopped === "budget"
        ? "engine not calibrated: --calibration-ms ended it before any run completed; routing uses the default cost model"
        : "engine not calibrated: routing uses the default cost model",
    );
  else if (c.stopped === "budget") logger.info(fields, "engine calibration cut short by --calibration-ms");
  else if (c.stopped !== undefined) logger.warn(fields, "engine calibration cut short by an engine error");
  else logger.info(fields, "engine calibrated");
  if (c.reset === "pending")
    logger.warn(fields, "engine calibration: the engine is still freeing what its runs cached");
  else if (c.reset === "failed")
    logger.warn(fields, "engine calibration: the engine could not free what its runs cached");
}
