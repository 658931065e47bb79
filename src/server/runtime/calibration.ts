/**
 * Start-up calibration: before a node says it is ready, a few short runs measure its engine's costs
 * (engine-costs.ts: fixed, per uncached, per cached and per output token), so cost-aware routing and
 * the costs it advertises start from this machine instead of the configured prior. A cold node
 * otherwise recomputes prompts a peer holds (it believes its prefill cheap until its own runs say
 * otherwise) exactly when routing matters most.
 *
 * The runs: a long and a short prompt, each cold (a fresh nonce first, so nothing is cached), then the
 * long one again (its prefix now cached), `OUTPUT_TOKENS` tokens out each; two rounds while the budget
 * lasts. Bounded: no run starts after `budgetMs`, and a run still going at the budget is aborted (its
 * sample is lost, the others stand). Afterwards what the runs cached is freed (node-managed caches:
 * `evict`; engine-managed: `resetCache`), so the node's tree and its engine agree again.
 * Works with any Engine: the sim engine, embedded llama.cpp, remote servers (text prompts).
 */
import type { Engine, EngineRequest, EngineResult, EvictedRun } from "../../core/engine.js";
import type { CostSample } from "../../core/node/engine-costs.js";

export interface CalibrationOptions {
  /** Longest the whole calibration may take, ms (0: none is run). */
  budgetMs: number;
  /** Rounds of three runs (each round adds a sample per shape). */
  rounds?: number;
  now?: () => number;
}

export interface Calibration {
  samples: CostSample[];
  /** Wall time the runs took, ms. */
  ms: number;
  /** Why it stopped before every planned run (budget, an engine error); undefined if complete. */
  stopped?: string;
}

const OUTPUT_TOKENS = 8;
const LONG_WORDS = 256;
const SHORT_WORDS = 24;

export async function calibrateEngine(engine: Engine, o: CalibrationOptions): Promise<Calibration> {
  const now = o.now ?? (() => performance.now());
  const start = now();
  const samples: CostSample[] = [];
  if (!(o.budgetMs > 0)) return { samples, ms: 0, stopped: "disabled" };
  const end = start + o.budgetMs;
  const made: EngineRequest[] = [];
  let stopped: string | undefined;
  try {
    const rounds = o.rounds ?? 2;
    for (let r = 0; r < rounds && stopped === undefined; r++) {
      const long = await prompt(engine, `r${r}l`, LONG_WORDS);
      const short = await prompt(engine, `r${r}s`, SHORT_WORDS);
      for (const req of [long, short, long]) {
        if (now() >= end) {
          stopped = "budget";
          break;
        }
        made.push(req);
        const res = await runWithin(engine, req, end - now());
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
  await forget(engine, made);
  return { samples, ms: now() - start, ...(stopped === undefined ? {} : { stopped }) };
}

/** A prompt no cache holds yet (a fresh nonce first), of about `words` words, fitting the context. */
async function prompt(engine: Engine, tag: string, words: number): Promise<EngineRequest> {
  const nonce = `calibration-${tag}-${Math.random().toString(36).slice(2, 10)}`;
  const room = Math.max(8, engine.info.maxContextTokens - OUTPUT_TOKENS - 8);
  let n = words;
  for (;;) {
    const text = `${nonce} ${Array.from({ length: n }, (_, i) => `w${i.toString(36)}`).join(" ")}`;
    const tokens = await engine.tokenize(text);
    if (tokens.length <= room || n <= 1) {
      return { id: nonce, tokens, prompt: text, maxTokens: OUTPUT_TOKENS, temperature: 0 };
    }
    n = Math.max(1, Math.floor((n * room) / tokens.length / 1.1));
  }
}

/**
 * Runs `req`, aborted after `ms`: undefined if it was. Bounded even when the engine ignores the abort
 * (a wedged engine): the wait ends at the budget whatever the run does.
 */
async function runWithin(engine: Engine, req: EngineRequest, ms: number): Promise<EngineResult | undefined> {
  const ac = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<undefined>((resolve) => {
    timer = setTimeout(
      () => {
        ac.abort();
        resolve(undefined);
      },
      Math.max(1, ms),
    );
  });
  const run = engine.run(req, undefined, ac.signal).catch((err: unknown) => {
    if (ac.signal.aborted) return undefined;
    throw err;
  });
  try {
    return await Promise.race([run, expired]);
  } finally {
    clearTimeout(timer);
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

/** Frees what the calibration runs cached: the node's tree never held it. */
async function forget(engine: Engine, made: readonly EngineRequest[]): Promise<void> {
  if (made.length === 0) return;
  if (engine.info.cacheMode === "engine-managed") {
    await engine.resetCache?.().catch(() => {});
    return;
  }
  const runs: EvictedRun[] = [...new Set(made)].map((r) => ({ path: r.tokens, keep: 0 }));
  engine.evict?.(runs);
}
