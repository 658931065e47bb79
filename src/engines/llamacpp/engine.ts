/**
 * The embedded engine: node-llama-cpp on the CPU with an exact, engine-managed prefix cache.
 *
 * First level: one context with K sequences (slots). A request takes the slot sharing the longest
 * prefix with it, else the least-recently-used slot, and keeps exactly the shared prefix
 * (adaptStateToTokens without shifting), so cached tokens = the slot's nextTokenIndex.
 * Second level: saved sequence states. A slot's contents are saved before they are overwritten
 * ("spilled"), and a saved state is loaded back when it shares a longer prefix than any slot.
 * After every run the engine reports all slot and saved-state sequences, which the node's tree
 * mirrors exactly, evictions included. Runs are serialized: one at a time per engine.
 * Namespaces (tenants' `cacheSalt`): llama.cpp compares tokens only, so each slot and saved state is
 * tagged with the namespace that computed it. A request reuses a slot or loads a state of its own
 * namespace only; a slot holding another's content is spilled and emptied first, so nothing of it is
 * reused. Slots report their content, and states are kept, as cache keys (`keyTokens`).
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import type {
  LlamaContext,
  LlamaContextSequence,
  LlamaContextSequenceRepeatPenalty,
  LlamaModel,
  Token,
} from "node-llama-cpp";
import type { z } from "zod";
import type {
  ChatMessage,
  Engine,
  EngineChunk,
  EngineInfo,
  EngineRequest,
  EngineResult,
  Tokens,
} from "../../core/engine.js";
import { type NamespaceFields, promptMatch } from "../../core/namespace.js";
import { EngineAbortedError, EngineInputError, EngineUnavailableError } from "../errors.js";
import { GgufError, validateGguf } from "../gguf/validate.js";
import { DEFAULT_NAMESPACE, namespaceTag, sameNamespace, taggedKey } from "../namespace-tags.js";
import { StopAwareOutput } from "../output.js";
import { renderChat } from "./chat.js";
import { type LlamaCppLog, type LlamaCppOptions, LlamaCppOptionsSchema } from "./options.js";
import { cpuLlama, takeLlamaErrors } from "./runtime.js";
import { type SavedState, StateCache } from "./state-cache.js";

const stderrLog: LlamaCppLog = (msg, fields) =>
  console.warn(`prefixmesh llamacpp: ${msg}`, JSON.stringify(fields));

/** Saved-state counters since the engine started (cumulative, for metrics and benchmarks). */
export interface StateStats {
  states: number;
  bytes: number;
  saves: number;
  saveFailures: number;
  loads: number;
  /** Loads that failed and fell back to recomputing the prompt (the state was dropped). */
  loadFailures: number;
}

const STATE_DIR_PREFIX = "prefixmesh-states-";
/**
 * Directories named without a pid (`prefixmesh-states-XXXXXX`, written by builds before the pid was
 * added, or by anything else) cannot be checked for a live owner; they are removed once untouched
 * this long. A live engine's directory changes whenever it saves or drops a state.
 */
export const ORPHAN_STATE_DIR_AGE_MS = 60 * 60 * 1000;
/** State directories of engines not yet closed: removed at process exit (tmpfs is RAM). */
const liveStateDirs = new Set<string>();
process.once("exit", () => {
  for (const d of liveStateDirs) rmSync(d, { recursive: true, force: true });
});

/**
 * Removes state directories left by processes that died without closing (e.g. SIGKILL): those whose
 * pid is gone, and pid-less ones untouched for `ORPHAN_STATE_DIR_AGE_MS`. Best effort: never throws.
 */
export function removeOrphanStateDirs(base: string, now = Date.now()): void {
  let names: string[];
  try {
    names = readdirSync(base);
  } catch {
    return;
  }
  const withPid = new RegExp(`^${STATE_DIR_PREFIX}(\\d+)-`);
  for (const name of names) {
    if (!name.startsWith(STATE_DIR_PREFIX)) continue;
    const dir = join(base, name);
    const m = withPid.exec(name);
    try {
      if (m) {
        try {
          process.kill(Number(m[1]), 0); // throws ESRCH when the owner is gone
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code === "ESRCH") rmSync(dir, { recursive: true, force: true });
        }
      } else {
        const st = statSync(dir);
        if (st.isDirectory() && now - st.mtimeMs > ORPHAN_STATE_DIR_AGE_MS)
          rmSync(dir, { recursive: true, force: true });
      }
    } catch {
      // raced with another sweeper or not ours to remove: leave it
    }
  }
}

interface Slot {
  seq: LlamaContextSequence;
  lastUsed: number;
  /** The namespace of the request that computed the slot's content. */
  ns: NamespaceFields;
}

/**
 * OpenAI's penalties as node-llama-cpp's, on the last PENALTY_LAST_N tokens of prompt and output as
 * llama-server counts them, its multiplicative repeat penalty off (1): OpenAI has none.
 */
const PENALTY_LAST_N = 64;
function repeatPenalty(
  req: EngineRequest,
  prompt: readonly Token[],
  generated: readonly Token[],
): { repeatPenalty?: LlamaContextSequenceRepeatPenalty } {
  if (!req.presencePenalty && !req.frequencyPenalty) return {};
  const recent = () => {
    const fromPrompt = PENALTY_LAST_N - generated.length;
    return fromPrompt > 0 ? [...prompt.slice(-fromPrompt), ...generated] : generated.slice(-PENALTY_LAST_N);
  };
  return {
    repeatPenalty: {
      punishTokens: recent,
      maxPunishTokens: PENALTY_LAST_N,
      penalty: 1,
      presencePenalty: req.presencePenalty ?? 0,
      frequencyPenalty: req.frequencyPenalty ?? 0,
    },
  };
}

export class LlamaCppEngine implements Engine {
  readonly info: EngineInfo;
  private tail: Promise<unknown> = Promise.resolve();
  private clock = 0;
  private closed = false;
  private failure: string | undefined;
  private readonly counts = { saves: 0, saveFailures: 0, loads: 0, loadFailures: 0 };

  private constructor(
    private readonly model: LlamaModel,
    private readonly context: LlamaContext,
    private readonly slots: Slot[],
    private readonly states: StateCache,
    private readonly stateRoot: string,
    private readonly opts: z.output<typeof LlamaCppOptionsSchema>,
    private readonly vocabSize: number,
    private readonly hasTemplate: boolean,
    private readonly log: LlamaCppLog,
  ) {
    this.info = {
      kind: "llamacpp",
      model: opts.modelName ?? basename(opts.modelPath).replace(/\.gguf$/i, ""),
      capacityTokens: (opts.slots + opts.maxSavedStates) * context.contextSize,
      cacheMode: "engine-managed",
      maxContextTokens: context.contextSize,
      needsPromptText: false,
      // An aborted run stops between tokens; its slot's content is read back (`cachedSequences`).
      abortable: true,
    };
  }

  /** Validates the GGUF first: a bad file is a clear GgufError, never a dead process. */
  static async create(options: LlamaCppOptions, hooks: { log?: LlamaCppLog } = {}): Promise<LlamaCppEngine> {
    const opts = LlamaCppOptionsSchema.parse(options);
    const summary = validateGguf(opts.modelPath);
    const llama = await cpuLlama();
    takeLlamaErrors();
    let model: LlamaModel;
    try {
      model = await llama.loadModel({ modelPath: opts.modelPath, gpuLayers: 0 });
    } catch (e) {
      const why = takeLlamaErrors().join("; ");
      throw new GgufError(
        opts.modelPath,
        `llama.cpp could not load it: ${(e as Error).message}${why ? ` (${why})` : ""}`,
      );
    }
    let context: LlamaContext;
    try {
      context = await model.createContext({
        sequences: opts.slots,
        contextSize: opts.slotContext,
        batchSize: opts.batchSize,
        // With the runtime's maxThreads = 0 this is the exact thread count, not a shared-pool hint.
        threads: opts.threads,
        flashAttention: opts.flashAttention,
      });
    } catch (e) {
      await model.dispose();
      throw e;
    }
    const slots: Slot[] = Array.from({ length: opts.slots }, () => ({
      seq: context.getSequence(),
      lastUsed: 0,
      ns: DEFAULT_NAMESPACE,
    }));
    const base = opts.stateDir ?? (existsSync("/dev/shm") ? "/dev/shm" : tmpdir());
    mkdirSync(base, { recursive: true });
    removeOrphanStateDirs(base);
    const stateRoot = mkdtempSync(join(base, `${STATE_DIR_PREFIX}${process.pid}-`));
    liveStateDirs.add(stateRoot);
    const states = new StateCache(stateRoot, {
      maxStates: opts.maxSavedStates,
      maxBytes: opts.maxSavedBytes,
    });
    const vocab = summary.arrayLengths.get("tokenizer.ggml.tokens") ?? Number.MAX_SAFE_INTEGER;
    return new LlamaCppEngine(
      model,
      context,
      slots,
      states,
      stateRoot,
      opts,
      vocab,
      summary.chatTemplate !== undefined,
      hooks.log ?? stderrLog,
    );
  }

  /** Tokens exactly as they will be evaluated: BOS prepended when the model wants it, specials parsed. */
  async tokenize(text: string): Promise<Tokens> {
    this.ensureOpen();
    const tokens = this.model.tokenize(text, true);
    const bos = this.model.tokens.bos;
    if (bos !== null && this.model.tokens.shouldPrependBosToken && tokens[0] !== bos) tokens.unshift(bos);
    return Uint32Array.from(tokens as number[]);
  }

  async applyChatTemplate(messages: ChatMessage[]): Promise<string> {
    this.ensureOpen();
    return renderChat(this.model, this.hasTemplate, messages);
  }

  run(req: EngineRequest, onChunk?: (c: EngineChunk) => void, signal?: AbortSignal): Promise<EngineResult> {
    const result = this.tail.then(() => this.runNow(req, onChunk, signal));
    this.tail = result.catch(() => undefined);
    return result;
  }

  /** The sequences the node's tree must hold (as cache keys): every slot plus every saved state. */
  cachedSequences(): Tokens[] {
    const out: Tokens[] = [];
    for (const s of this.slots) if (s.seq.nextTokenIndex > 0) out.push(this.slotKey(s));
    for (const st of this.states.entries) out.push(st.tokens);
    return out;
  }

  /** Saved-state statistics, for metrics and benchmarks. */
  stateStats(): StateStats {
    return { states: this.states.entries.length, bytes: this.states.totalBytes, ...this.counts };
  }

  /**
   * Empties both cache levels (every slot and every saved state), queued behind running requests, so
   * `cachedSequences()` is empty afterwards: a fresh start for comparing policies on one cluster.
   */
  resetCache(): Promise<void> {
    const done = this.tail.then(async () => {
      this.ensureOpen();
      for (const s of this.slots) {
        await s.seq.clearHistory();
        s.lastUsed = 0;
        s.ns = DEFAULT_NAMESPACE;
      }
      this.states.clear();
    });
    this.tail = done.catch(() => undefined);
    return done;
  }

  async health(): Promise<{ ok: boolean; detail?: string }> {
    if (this.closed) return { ok: false, detail: "closed" };
    if (this.failure) return { ok: false, detail: this.failure };
    return { ok: true };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.tail;
    this.states.clear();
    rmSync(this.stateRoot, { recursive: true, force: true });
    liveStateDirs.delete(this.stateRoot);
    await this.context.dispose();
    await this.model.dispose();
  }

  /** A slot's content as its namespace's cache key. */
  private slotKey(s: Slot): Tokens {
    return taggedKey(s.ns, Uint32Array.from(s.seq.contextTokens as number[]));
  }

  private ensureOpen(): void {
    if (this.closed) throw new EngineUnavailableError("engine is closed");
  }

  private validate(req: EngineRequest): void {
    const n = req.tokens.length;
    if (n === 0) throw new EngineInputError("prompt is empty");
    if (!Number.isInteger(req.maxTokens) || req.maxTokens < 0)
      throw new EngineInputError("maxTokens must be ≥ 0");
    if (n + req.maxTokens > this.context.contextSize) {
      throw new EngineInputError(
        `prompt (${n}) + maxTokens (${req.maxTokens}) exceeds the context of ${this.context.contextSize} tokens`,
      );
    }
    for (const t of req.tokens)
      if (t >= this.vocabSize) throw new EngineInputError(`token id ${t} is outside the vocabulary`);
  }

  private async runNow(
    req: EngineRequest,
    onChunk?: (c: EngineChunk) => void,
    signal?: AbortSignal,
  ): Promise<EngineResult> {
    this.ensureOpen();
    this.validate(req);
    if (signal?.aborted) throw new EngineAbortedError();
    const tokens = Array.from(req.tokens) as Token[];
    const t0 = performance.now();
    let slot: Slot;
    const ns = namespaceTag(req);
    try {
      const prepared = await this.prepareSlot(tokens, ns);
      slot = prepared.slot;
      // A full hit still needs the last prompt token evaluated to produce logits.
      const keep = Math.min(prepared.shared, tokens.length - 1);
      await slot.seq.adaptStateToTokens(tokens.slice(0, keep), false);
      // Whatever it held (another namespace's content is cut to nothing above), it is ns's now.
      slot.ns = ns;
    } catch (e) {
      throw new EngineUnavailableError(`preparing the prefix cache failed: ${(e as Error).message}`);
    }
    const seq = slot.seq;
    const cachedTokens = seq.nextTokenIndex;
    const fresh = tokens.slice(cachedTokens);

    const output = new StopAwareOutput(req.stop ?? [], onChunk ? (text) => onChunk({ text }) : undefined);
    const generated: Token[] = [];
    const lastPrompt = tokens.slice(-4);
    let finishReason: EngineResult["finishReason"] = "length";
    let prefillMs = 0;
    let tDecode = 0;
    let aborted = false;
    try {
      if (req.maxTokens === 0) {
        await seq.evaluateWithoutGeneratingNewTokens(fresh);
        prefillMs = performance.now() - t0;
        tDecode = performance.now();
      } else {
        const sampling = {
          temperature: req.temperature ?? 0,
          ...(req.topP !== undefined ? { topP: req.topP } : {}),
          ...(req.seed !== undefined ? { seed: req.seed } : {}),
          ...repeatPenalty(req, tokens, generated),
        };
        for await (const token of seq.evaluate(fresh, sampling)) {
          if (generated.length === 0) {
            prefillMs = performance.now() - t0;
            tDecode = performance.now();
          }
          if (signal?.aborted) {
            aborted = true;
            break;
          }
          if (this.model.isEogToken(token)) {
            finishReason = "stop";
            break;
          }
          generated.push(token);
          if (output.update(this.model.detokenize(generated, false, lastPrompt))) {
            finishReason = "stop";
            break;
          }
          if (generated.length >= req.maxTokens) break;
        }
      }
    } catch (e) {
      this.failure = `last run failed: ${(e as Error).message}`;
      throw new EngineUnavailableError(`llama.cpp evaluation failed: ${(e as Error).message}`);
    }
    slot.lastUsed = ++this.clock;
    if (aborted) throw new EngineAbortedError();
    this.failure = undefined;
    const text = output.stopped
      ? output.finish()
      : output.finish(this.model.detokenize(generated, false, lastPrompt));
    return {
      text,
      completionTokens: generated.length,
      promptTokens: tokens.length,
      cachedTokens,
      prefillMs,
      decodeMs: tDecode > 0 ? performance.now() - tDecode : 0,
      finishReason,
      cachedSequences: this.cachedSequences(),
    };
  }

  /**
   * Picks the slot: the one sharing the longest prefix when that share is worth taking over the slot,
   * else the least-recently-used slot. "Worth it" = the shared prefix covers at least
   * `slotReuseFraction` of the prompt, or the slot loses almost nothing (it holds a prefix of the
   * prompt). Without this, every prompt would pile onto one slot, since all prompts share BOS (and
   * often a template header). A saved state is loaded into the chosen slot when it shares more than
   * the slot does. Slot contents about to be lost are spilled to the state cache first. Returns the
   * slot and the prefix it now shares with the prompt.
   */
  private async prepareSlot(tokens: Token[], ns: NamespaceFields): Promise<{ slot: Slot; shared: number }> {
    // Another namespace's content shares nothing with the prompt, whatever its tokens.
    const shared = (s: Slot) =>
      sameNamespace(s.ns, ns) ? s.seq.compareContextTokens(tokens).firstDifferentIndex : 0;
    let best: Slot | undefined;
    let bestLen = 0;
    for (const s of this.slots) {
      const len = shared(s);
      if (len > bestLen) {
        best = s;
        bestLen = len;
      }
    }
    const worthIt =
      best !== undefined &&
      (bestLen >= this.opts.slotReuseFraction * tokens.length ||
        best.seq.nextTokenIndex - bestLen < this.opts.minSpillTokens);
    const slot = worthIt && best ? best : this.slots.reduce((a, b) => (b.lastUsed < a.lastUsed ? b : a));
    const slotLen = slot === best ? bestLen : shared(slot);
    // States are kept as cache keys: a match counts the namespace's pseudo-block, which reuses nothing.
    const key = taggedKey(ns, Uint32Array.from(tokens as number[]));
    const match = this.states.bestMatch(key);
    const saved = match && { state: match.state, length: promptMatch(ns, match.length) };
    if (saved && saved.length > slotLen) {
      // The spill must not evict the state we are about to load (it used to: LRU picked it).
      await this.spill(slot, 0, saved.state);
      await this.loadState(slot, saved.state);
      // Measured after the load: a failed load leaves the slot empty.
      return { slot, shared: shared(slot) };
    }
    // Spilling saves the slot without changing it: the shared prefix is still slotLen.
    await this.spill(slot, slotLen);
    return { slot, shared: slotLen };
  }

  /**
   * Loads a saved state into a slot. A failed load never fails the request: the state is dropped and
   * the slot is left empty, so the prompt is recomputed. The slot is emptied first because
   * node-llama-cpp forgets the slot's tokens before the native load, which can fail without touching
   * the KV cells: stale cells under a sequence believed empty would corrupt the next evaluation.
   */
  private async loadState(slot: Slot, state: SavedState): Promise<void> {
    await slot.seq.clearHistory();
    try {
      await slot.seq.loadStateFromFile(state.file, { acceptRisk: true });
      slot.ns = state.ns;
      this.counts.loads++;
      this.states.touch(state);
    } catch (e) {
      this.counts.loadFailures++;
      this.states.delete(state);
      const llama = takeLlamaErrors().join("; ");
      this.log("saved state failed to load; recomputing the prompt", {
        file: state.file,
        tokens: state.tokens.length,
        error: (e as Error).message,
        ...(llama ? { llama } : {}),
      });
      if (slot.seq.nextTokenIndex > 0) await slot.seq.clearHistory();
    }
  }

  /**
   * Saves a slot's sequence before all but `keep` of its tokens are dropped, if worth keeping. A failed
   * save only loses that cache entry, never the request. `protect`: see StateCache.add.
   */
  private async spill(slot: Slot, keep: number, protect?: SavedState): Promise<void> {
    const n = slot.seq.nextTokenIndex;
    if (n - keep < this.opts.minSpillTokens) return;
    const tokens = this.slotKey(slot);
    if (this.states.covers(tokens)) return;
    try {
      const added = await this.states.add(
        tokens,
        async (file) => {
          await slot.seq.saveStateToFile(file);
        },
        protect,
        slot.ns,
      );
      if (added) this.counts.saves++;
    } catch (e) {
      this.counts.saveFailures++;
      this.log("saving a slot's state failed; its tokens leave the cache", {
        tokens: tokens.length,
        error: (e as Error).message,
      });
    }
  }
}
