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
import { basename } from "node:path";
import type { LlamaContext, LlamaModel, Token } from "node-llama-cpp";
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
import { EngineAbortedError, EngineInputError, EngineUnavailableError } from "../errors.js";
import { GgufError, validateGguf } from "../gguf/validate.js";
import { DEFAULT_NAMESPACE, namespaceTag } from "../namespace-tags.js";
import { StopAwareOutput } from "../output.js";
import { renderChat } from "./chat.js";
import { type LlamaCppLog, type LlamaCppOptions, LlamaCppOptionsSchema } from "./options.js";
import { repeatPenalty } from "./penalty.js";
import { cpuLlama, takeLlamaErrors } from "./runtime.js";
import { type Slot, SlotCache, slotKey } from "./slots.js";
import { StateCache } from "./state-cache.js";
import { createStateDir, removeStateDir } from "./state-dirs.js";

// Swept and aged by state-dirs.ts; exported here too, where the engine's callers and tests find them.
export { ORPHAN_STATE_DIR_AGE_MS, removeOrphanStateDirs } from "./state-dirs.js";

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

export class LlamaCppEngine implements Engine {
  readonly info: EngineInfo;
  private tail: Promise<unknown> = Promise.resolve();
  private clock = 0;
  private closed = false;
  private failure: string | undefined;
  private readonly cache: SlotCache;

  private constructor(
    private readonly model: LlamaModel,
    private readonly context: LlamaContext,
    private readonly slots: Slot[],
    private readonly states: StateCache,
    private readonly stateRoot: string,
    opts: z.output<typeof LlamaCppOptionsSchema>,
    private readonly vocabSize: number,
    private readonly hasTemplate: boolean,
    log: LlamaCppLog,
  ) {
    this.cache = new SlotCache(slots, states, opts, log);
    this.info = {
      kind: "llamacpp",
      model: opts.modelName ?? basename(opts.modelPath).replace(/\.gguf$/i, ""),
      capacityTokens: (opts.slots + opts.maxSavedStates) * context.contextSize,
      cacheMode: "engine-managed",
      maxContextTokens: context.contextSize,
      needsPromptText: false,
      // An aborted run stops between tokens (between context batches in a prefill); its slot's
      // content is read back (`cachedSequences`).
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
    const stateRoot = createStateDir(opts.stateDir);
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
    for (const s of this.slots) if (s.seq.nextTokenIndex > 0) out.push(slotKey(s));
    for (const st of this.states.entries) out.push(st.tokens);
    return out;
  }

  /** Saved-state statistics, for metrics and benchmarks. */
  stateStats(): StateStats {
    return { states: this.states.entries.length, bytes: this.states.totalBytes, ...this.cache.counts };
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
    removeStateDir(this.stateRoot);
    await this.context.dispose();
    await this.model.dispose();
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

  /**
   * Evaluates all but the last batch of `fresh`, one context batch at a time, and returns what is left
   * (empty when `signal` aborted in between): llama.cpp checks no signal inside a prefill, so a long
   * prompt would otherwise hold the engine, and a stop, until it ends. Cut at the batch size, the
   * batches are the ones the engine forms itself: the numbers, hence the text, are unchanged.
   */
  private async prefillHead(seq: Slot["seq"], fresh: Token[], signal?: AbortSignal): Promise<Token[]> {
    const batch = this.context.batchSize;
    let from = 0;
    while (fresh.length - from > batch) {
      if (signal?.aborted) return [];
      await seq.evaluateWithoutGeneratingNewTokens(fresh.slice(from, from + batch));
      from += batch;
    }
    return signal?.aborted ? [] : fresh.slice(from);
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
      const prepared = await this.cache.prepare(tokens, ns);
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
    let fresh = tokens.slice(cachedTokens);

    const output = new StopAwareOutput(req.stop ?? [], onChunk ? (text) => onChunk({ text }) : undefined);
    const generated: Token[] = [];
    const lastPrompt = tokens.slice(-4);
    let finishReason: EngineResult["finishReason"] = "length";
    let prefillMs = 0;
    let tDecode = 0;
    let aborted = false;
    try {
      fresh = await this.prefillHead(seq, fresh, signal);
      if (fresh.length === 0) aborted = true;
      else if (req.maxTokens === 0) {
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
}
