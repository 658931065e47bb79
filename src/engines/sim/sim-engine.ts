/**
 * The simulated engine: an SGLang-like, node-managed KV cache (KvCache) plus a cost model
 * (profiles.ts). Two faces:
 *  - `execute` — synchronous, for the discrete-event simulator's hot path (returns the modelled
 *    duration instead of waiting);
 *  - the Engine port (`run` etc.) — for the real daemon's `--engine sim`, which waits the modelled
 *    time through an injected `sleep` so multi-process tests are fast and deterministic.
 * Output is a deterministic function of the prompt (cost.ts), so answers are checkable.
 */
import type {
  ChatMessage,
  Engine,
  EngineChunk,
  EngineInfo,
  EngineRequest,
  EngineResult,
  EvictedRun,
  Tokens,
} from "../../core/engine.js";
import { keyTokens, promptMatch } from "../../core/namespace.js";
import { EngineAbortedError } from "../errors.js";
import { engineCost, simOutput } from "./cost.js";
import { KvCache } from "./kv-cache.js";
import type { CostProfile } from "./profiles.js";

export interface SimEngineOptions {
  profile: CostProfile;
  /** KV capacity in tokens; default the profile's. */
  capacityTokens?: number;
  /** Waits `ms` (the Engine port's `run`); default a real timer. Tests inject a fake clock. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Multiplies modelled times in `run` (e.g. 0.01 to make a daemon test 100× faster). */
  timeScale?: number;
  /** The clock an aborted run's prefill progress is read on (ms); default `performance.now`. */
  now?: () => number;
  maxContextTokens?: number;
}

function defaultSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason ?? new Error("aborted"));
      return;
    }
    const done = (): void => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    };
    // Node clamps timers to ≥ 1 ms; a sub-millisecond modelled time (an instant engine in overhead
    // benchmarks) would otherwise cost a whole timer tick. Still asynchronous, like a real engine.
    const t = ms < 0.5 ? setImmediate(done) : setTimeout(done, ms);
    const onAbort = (): void => {
      if (ms < 0.5) clearImmediate(t as NodeJS.Immediate);
      else clearTimeout(t as NodeJS.Timeout);
      reject(signal?.reason ?? new Error("aborted"));
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** True for the characters JavaScript's `\s` matches (ECMAScript WhiteSpace and LineTerminator). */
function isSpace(c: number): boolean {
  if (c <= 0x20) return c === 0x20 || (c >= 0x09 && c <= 0x0d);
  if (c < 0xa0) return false;
  return (
    c === 0xa0 ||
    c === 0x1680 ||
    (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 ||
    c === 0x2029 ||
    c === 0x202f ||
    c === 0x205f ||
    c === 0x3000 ||
    c === 0xfeff
  );
}

/** Ids of the words being hashed; reused, so a tokenization allocates only its result. */
let scratch = new Uint32Array(1024);

/**
 * Deterministic toy tokenizer for `--engine sim`: one id per whitespace-separated word (FNV-1a of its
 * UTF-16 code units, mod 100 000). One pass over the characters rather than `split(/\s+/)`: the split
 * made a string per word, about half of what a sim node allocates per request.
 */
export function wordIds(text: string): Tokens {
  // At most one word per two characters (a word and the space after it), plus a last one.
  if (scratch.length < (text.length >> 1) + 1) scratch = new Uint32Array((text.length >> 1) + 1);
  let n = 0;
  let h = 0x811c9dc5;
  let inWord = false;
  for (let k = 0; k < text.length; k++) {
    const c = text.charCodeAt(k);
    if (isSpace(c)) {
      if (inWord) scratch[n++] = (h >>> 0) % 100_000;
      inWord = false;
      continue;
    }
    if (!inWord) h = 0x811c9dc5;
    inWord = true;
    h ^= c;
    h = Math.imul(h, 0x01000193);
  }
  if (inWord) scratch[n++] = (h >>> 0) % 100_000;
  return scratch.slice(0, n);
}

export class SimEngine implements Engine {
  readonly info: EngineInfo;
  readonly cache = new KvCache();
  private readonly sleep: NonNullable<SimEngineOptions["sleep"]>;
  private readonly timeScale: number;

  constructor(private readonly opts: SimEngineOptions) {
    const capacity = opts.capacityTokens ?? opts.profile.capacityTokens;
    this.info = {
      kind: "sim",
      model: `sim:${opts.profile.name}`,
      capacityTokens: capacity,
      cacheMode: "node-managed",
      maxContextTokens: opts.maxContextTokens ?? 32_768,
      needsPromptText: false,
      // An aborted run keeps what its prefill got through, and says how much (keptTokens).
      abortable: true,
    };
    this.sleep = opts.sleep ?? defaultSleep;
    this.timeScale = opts.timeScale ?? 1;
  }

  /**
   * Starts one run, synchronously: frees `evicted`, computes the cost from the real cache hit.
   * Returns the result and the modelled duration; call `complete` when the run ends to cache it.
   */
  execute(req: EngineRequest, evicted: readonly EvictedRun[]): { result: EngineResult; durationMs: number } {
    for (const r of evicted) this.cache.remove(r);
    // The cache holds cache keys, as the node's tree does: namespaces (tenants, adapters) stay apart.
    const cached = promptMatch(req, this.cache.match(keyTokens(req)));
    const cost = engineCost(this.opts.profile, req.tokens.length, cached, req.maxTokens);
    const result: EngineResult = {
      text: simOutput(req.tokens, req.maxTokens),
      completionTokens: Math.max(0, req.maxTokens),
      promptTokens: req.tokens.length,
      cachedTokens: cached,
      prefillMs: cost.prefillMs,
      decodeMs: cost.decodeMs,
      finishReason: "length",
    };
    return { result, durationMs: cost.prefillMs + cost.decodeMs };
  }

  /** The run ended: keep the first `cacheTokens` tokens of its cache key (`keyTokens`) cached. */
  complete(tokens: Tokens, cacheTokens: number): void {
    const n = Math.min(cacheTokens, tokens.length);
    if (n > 0) this.cache.insert(tokens.subarray(0, n));
  }

  // ---- the Engine port (daemon `--engine sim`) ----

  async tokenize(text: string): Promise<Tokens> {
    return wordIds(text);
  }

  async applyChatTemplate(messages: ChatMessage[]): Promise<string> {
    return `${messages.map((m) => `<|${m.role}|>\n${m.content}`).join("\n")}\n<|assistant|>\n`;
  }

  async run(
    req: EngineRequest,
    onChunk?: (c: EngineChunk) => void,
    signal?: AbortSignal,
  ): Promise<EngineResult> {
    const { result } = this.execute(req, []);
    // Caches the whole prompt when it fits, as the node's tree will (the node evicted first).
    const key = keyTokens(req);
    const fits = this.cache.size + key.length - this.cache.match(key) <= this.info.capacityTokens;
    const prefillMs = result.prefillMs * this.timeScale;
    const now = this.opts.now ?? (() => performance.now());
    const start = now();
    let prefilled = false;
    try {
      await this.sleep(prefillMs, signal);
      prefilled = true;
      await this.sleep(result.decodeMs * this.timeScale, signal);
    } catch (e) {
      if (!signal?.aborted) throw e;
      const done = prefilled ? 1 : Math.min(1, (now() - start) / Math.max(prefillMs, 1e-9));
      const kept = fits ? keptOnAbort(this.cache.match(key), key.length, done) : 0;
      if (kept > 0) this.complete(key, kept);
      throw new EngineAbortedError(kept);
    }
    if (fits) this.complete(key, key.length);
    if (result.text.length > 0) onChunk?.({ text: result.text });
    // Report the times that passed, not the modelled ones: the node learns its costs from them and
    // weighs them against wall-clock round trips (a time-scaled engine would otherwise look 1/scale
    // times slower than it is, and cost-aware routing would forward far too eagerly).
    if (this.timeScale !== 1) {
      result.prefillMs *= this.timeScale;
      result.decodeMs *= this.timeScale;
    }
    return result;
  }

  evict(runs: EvictedRun[]): void {
    for (const r of runs) this.cache.remove(r);
  }

  async health(): Promise<{ ok: boolean; detail?: string }> {
    return { ok: true, detail: `sim engine, profile ${this.opts.profile.name}` };
  }

  async close(): Promise<void> {}
}

/**
 * What an aborted run leaves cached of its cache key: the prefix it found cached, and the share of
 * the rest its prefill got through (`done`, 0…1) — a server's prefix cache keeps the blocks it
 * computed (vLLM, SGLang) — or nothing new.
 */
export function keptOnAbort(matched: number, length: number, done: number): number {
  return matched + Math.floor(Math.max(0, Math.min(1, done)) * Math.max(0, length - matched));
}
