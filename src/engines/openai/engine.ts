/**
 * The remote engine: any OpenAI-compatible server (SGLang, vLLM, llama.cpp server, Ollama).
 *
 * Tokens. The router's tokens must equal the engine's. Prompts are tokenized by the server's `/tokenize`
 * when it has one (vLLM/SGLang shape `{model, prompt}` or llama.cpp shape `{content}`, told apart by a
 * probe that must come back non-empty), else by a configured local tokenizer (gpt-tokenizer), which is
 * only right for matching models.
 * URL. `--engine-url` may end in `/v1` (the OpenAI convention) or not: it is normalized once to the root.
 * Context. The limit per request is read from the server (`/v1/models`: vLLM/SGLang `max_model_len`,
 * llama.cpp `meta.n_ctx`; else llama.cpp's `/props` n_ctx per slot), else the configured value.
 * Chat. Messages are rendered locally into a prompt (llama.cpp server's `/apply-template` when present,
 * else the documented fallback template) and sent to `/v1/completions`: the routed tokens are then exactly
 * what the server evaluates. `/v1/chat/completions` is not used, because the server's template output is
 * not observable there.
 * Cache. `cacheMode: "node-managed"`: the server evicts on its own, so the node's tree approximates it by
 * LRU with `capacityTokens` (the paper lets the engine evict independently); the server cannot be told of
 * the tree's evictions, so there is no `evict`. With `kvEvents` (vLLM, SGLang) the engine is
 * engine-managed instead: its cache model (src/engines/kv-events) mirrors the server's cache from its KV
 * events and each result carries `cachedSequences`. Where the server reports hits
 * (`usage.prompt_tokens_details.cached_tokens`, or llama.cpp's `timings.cache_n`), the result carries them
 * with `cacheReported: true`, so predicted vs reported hits can be a metric.
 */
import { z } from "zod";
import type {
  ChatMessage,
  Engine,
  EngineChunk,
  EngineInfo,
  EngineRequest,
  EngineResult,
  Tokens,
} from "../../core/engine.js";
import { RadixTree } from "../../core/radix-tree.js";
import { type CachePrediction, type PredictionAccuracy, PredictionTally } from "../cache-prediction.js";
import { renderFallbackChat } from "../chat-fallback.js";
import { EngineInputError, EngineUnavailableError } from "../errors.js";
import { HttpClient } from "../http-client.js";
import type { KvEventsCacheModel, KvEventsStatus } from "../kv-events/cache-model.js";
import type { LlamaSlotCache, LlamaSlotsStatus } from "../llama-slots/slot-cache.js";
import { samplingFields } from "../sampling-fields.js";
import { completionsBody, streamCompletions } from "./completions.js";
import { type OpenAIEngineOptions, OpenAIEngineOptionsSchema } from "./options.js";
import { detectSlotMirror, fetchServerContext, SaltSupport } from "./server-info.js";
import { localTokens, RemoteTokenizer } from "./tokenize.js";
import { checkedUsage } from "./usage.js";

/** A remote result additionally says whether `cachedTokens` was reported by the server (else 0). */
export interface RemoteEngineResult extends EngineResult {
  cacheReported: boolean;
  /** Engine-local: the cache model's prediction for this run and the server's report. */
  cachePrediction?: CachePrediction;
}

/** How the engine models the server's cache, and how well its predictions held (for /cluster). */
export interface RemoteCacheStatus {
  mode: "llama-slots" | "kv-events" | "lru";
  accuracy: PredictionAccuracy;
  llamaSlots?: LlamaSlotsStatus;
  /** With KV events: whether the mirror is exact (and why not), the stream's and the mirror's counts. */
  kvEvents?: KvEventsStatus;
  /** Why the mirrored cache is not advertised now (the last health check failed), when it is not. */
  withheld?: string;
}

const ApplyTemplateResponse = z.object({ prompt: z.string() });
/** A server without `/apply-template` (vLLM, SGLang): the fallback template, for good. */
const TEMPLATE_ABSENT = new Set([404, 405]);

export class OpenAIEngine implements Engine {
  readonly info: EngineInfo;
  private readonly http: HttpClient;
  private readonly opts: z.output<typeof OpenAIEngineOptionsSchema>;
  /** The server's /tokenize, in the shape it takes (tokenize.ts). */
  private readonly tokenizer: RemoteTokenizer;
  /** Where `info.maxContextTokens` comes from: the server's report, or the configured fallback. */
  private contextFrom: "server" | "configured" = "configured";
  private contextReading: Promise<number | undefined> | undefined;
  private applyTemplateAvailable: boolean | undefined;
  private closed = false;
  private readonly cacheModel: KvEventsCacheModel | undefined;
  /** A llama.cpp server's slots, mirrored (the node chooses each request's slot). */
  private slotCache: LlamaSlotCache | undefined;
  /** Without KV events or slots: the LRU model of `capacityTokens` the node's tree also is. */
  private readonly lru: RadixTree;
  private lruTick = 0;
  private tally: PredictionTally;
  /** Whether the server ignores `cache_salt` (Ollama; llama-server without the slot mirror). */
  private readonly salt: SaltSupport;
  /**
   * Set while the last health check found the server unreachable: its mirrored cache is kept but not
   * offered (`cachedSequences` is empty), so peers stop forwarding to a cache nobody can serve.
   */
  private withheld: string | undefined;
  private readonly withheldListeners = new Set<() => void>();

  /** Builds the engine; with `kvEvents`, its cache model too (loading zeromq only then). */
  constructor(options: OpenAIEngineOptions, cacheModel?: KvEventsCacheModel) {
    this.opts = OpenAIEngineOptionsSchema.parse(options);
    if (this.opts.kvEvents && !cacheModel) throw new Error("kvEvents needs OpenAIEngine.create()");
    this.cacheModel = cacheModel;
    this.http = new HttpClient(this.opts.baseUrl, this.opts);
    this.tokenizer = new RemoteTokenizer(this.http, this.opts.model);
    this.salt = new SaltSupport(this.http);
    this.lru = new RadixTree({ capacity: this.opts.capacityTokens }, false);
    this.tally = new PredictionTally(cacheModel ? "kv-events" : "lru");
    this.info = {
      kind: "openai",
      model: this.opts.model,
      capacityTokens: this.opts.capacityTokens,
      cacheMode: cacheModel ? "engine-managed" : "node-managed",
      maxContextTokens: this.opts.maxContextTokens,
      needsPromptText: true,
      // Not by LRU: an aborted run's prompt stays in the server's cache if its prefill ended, which
      // the node cannot tell; engine-managed, the server's own cache is read back (the KV events).
      abortable: cacheModel !== undefined,
    };
  }

  /**
   * An engine with the server's context limit read when the server answers now; when it does not,
   * the configured limit holds until a health check reaches the server (said through `log`). With
   * `kvEvents`, its cache model follows the server's KV events (src/engines/kv-events) and says through
   * `log` when its mirror becomes degraded, forgets blocks, or is exact again.
   */
  static async create(
    options: OpenAIEngineOptions,
    log?: (msg: string, fields: Record<string, unknown>) => void,
  ): Promise<OpenAIEngine> {
    const opts = OpenAIEngineOptionsSchema.parse(options);
    let model: KvEventsCacheModel | undefined;
    if (opts.kvEvents) {
      // zeromq loads only for a server that publishes KV events.
      const { KvEventsCacheModel } = await import("../kv-events/cache-model.js");
      model = new KvEventsCacheModel(opts.kvEvents, opts.capacityTokens, log);
      model.start();
    }
    const engine = new OpenAIEngine(opts, model);
    if (!opts.kvEvents && opts.cacheMirror !== "lru")
      engine.useSlots(await detectSlotMirror(engine.http, opts, log));
    // Unseen cache: tenants stay apart only on a server keying it by `cache_salt` (server-info.ts).
    if (!opts.kvEvents && !engine.slotCache) await engine.salt.learn();
    try {
      if ((await engine.readServerContext()) === undefined)
        log?.("the server reports no context limit: using the configured one", {
          maxContextTokens: engine.info.maxContextTokens,
        });
    } catch (e) {
      log?.("the server did not answer: using the configured context limit until it does", {
        maxContextTokens: engine.info.maxContextTokens,
        error: (e as Error).message,
      });
    }
    return engine;
  }

  /** The server's cache as its slot mirror reads it (engine-managed), when the server is llama.cpp's. */
  private useSlots(slots: LlamaSlotCache | undefined): void {
    if (!slots) return;
    this.slotCache = slots;
    this.tally = slots.tally;
    this.info.cacheMode = "engine-managed";
    // An aborted run's slot is read back from the server before the abort is reported (slot-cache.ts).
    this.info.abortable = true;
  }

  /**
   * A tenant's `cacheSalt` on a server that would ignore it, or a LoRA adapter on llama-server (it
   * takes adapters by id per request, not by model name: it would run its base model): refused.
   */
  namespaceProblem(r: Pick<EngineRequest, "cacheSalt" | "adapter">): string | undefined {
    if (r.cacheSalt !== undefined && this.salt.ignoredBy)
      return `cache_salt is not supported by this node's engine: ${this.salt.ignoredBy} would share its cache between tenants`;
    if (r.adapter !== undefined && (this.slotCache || this.salt.ignoredBy?.startsWith("llama-server")))
      return "LoRA adapters by name are not supported on llama-server: it would run its base model";
    return undefined;
  }

  async tokenize(text: string, signal?: AbortSignal): Promise<Tokens> {
    if (this.opts.tokenizer === "local") return localTokens(text);
    const remote = await this.tokenizer.tokenize(text, signal);
    if (remote) return remote;
    if (this.opts.tokenizer === "server")
      throw new EngineUnavailableError("server has no /tokenize endpoint that returns tokens");
    return localTokens(text);
  }

  /**
   * Reads the server's context limit (per request: llama.cpp's per-slot n_ctx, vLLM's max_model_len)
   * into `info.maxContextTokens`; undefined (the configured value stays) when the server reports none.
   * Unreachable servers throw (EngineUnavailableError); `health()` tries again until one answers.
   */
  readServerContext(): Promise<number | undefined> {
    this.contextReading ??= fetchServerContext(this.http, this.opts.model).then(
      (n) => {
        if (n !== undefined) {
          this.info.maxContextTokens = n;
          this.contextFrom = "server";
        }
        return n;
      },
      (e: unknown) => {
        this.contextReading = undefined;
        throw e;
      },
    );
    return this.contextReading;
  }

  /** Where the context limit in `info` came from. */
  get contextSource(): "server" | "configured" {
    return this.contextFrom;
  }

  async applyChatTemplate(messages: ChatMessage[], signal?: AbortSignal): Promise<string> {
    if (this.opts.chatTemplate === "auto" && this.applyTemplateAvailable !== false) {
      try {
        const res = ApplyTemplateResponse.safeParse(
          await this.http.json("POST", "/apply-template", { messages }, signal),
        );
        if (res.success) {
          this.applyTemplateAvailable = true;
          return res.data.prompt;
        }
      } catch (e) {
        // Any other 4xx refuses this request only (a client's chat too large for a proxy, a wrong key).
        if (!(e instanceof EngineInputError) || !TEMPLATE_ABSENT.has(e.status ?? 0)) throw e;
      }
      this.applyTemplateAvailable = false;
    }
    return renderFallbackChat(messages);
  }

  async run(
    req: EngineRequest,
    onChunk?: (c: EngineChunk) => void,
    signal?: AbortSignal,
  ): Promise<RemoteEngineResult> {
    if (this.closed) throw new EngineUnavailableError("engine is closed");
    await this.salt.known(req);
    const refused = this.namespaceProblem(req);
    if (refused) throw new EngineInputError(refused);
    const limit = this.info.maxContextTokens;
    if (req.tokens.length + req.maxTokens > limit) {
      throw new EngineInputError(
        `prompt (${req.tokens.length}) + maxTokens (${req.maxTokens}) exceeds the server's context of ${limit} tokens`,
      );
    }
    if (this.slotCache) {
      await this.tokenizeShapeKnown();
      const r = await this.slotCache.run(req, samplingFields(req), onChunk, signal);
      // It answered (after reading /slots, set to be read when it was found down): offered again.
      this.withheld = undefined;
      return r;
    }
    // Text when we have it (the server tokenizes it to the same ids); ids only when they are the server's.
    let prompt: string | number[];
    if (req.prompt !== undefined) prompt = req.prompt;
    else if (this.tokenizer.shape === "vllm" || this.tokenizer.shape === "llamacpp")
      prompt = Array.from(req.tokens);
    else
      throw new EngineInputError(
        "remote engine needs the prompt text (local tokenizer ids may not be the server's)",
      );
    const body = completionsBody(req, this.opts.model, prompt);
    const predicted = this.cacheModel ? this.cacheModel.predict(req.tokens, req) : this.lru.match(req.tokens);
    const { text, chunks, finish, usage, timings, t0, firstAt, end } = await streamCompletions(
      this.http,
      body,
      onChunk,
      signal,
    );
    const { cachedTokens: reported, ...checked } = checkedUsage({ usage, timings });
    const prefillMs = checked.prefillMs ?? (firstAt > 0 ? firstAt - t0 : end - t0);
    const decodeMs = checked.decodeMs ?? (firstAt > 0 ? end - firstAt : 0);
    const cachedSequences = await this.cacheModel?.afterRun(req.tokens, predicted, reported, req);
    if (!this.cacheModel) this.rememberLru(req.tokens);
    // It answered: the result's sequences are offered, and so is the cache from now on.
    this.withheld = undefined;
    const cachePrediction = this.tally.observe(predicted, reported);
    return {
      text,
      completionTokens: checked.completionTokens ?? chunks,
      promptTokens: checked.promptTokens ?? req.tokens.length,
      cachedTokens: reported ?? 0,
      cacheReported: reported !== undefined,
      prefillMs,
      decodeMs,
      finishReason: finish === "length" ? "length" : "stop",
      ...(cachedSequences ? { cachedSequences } : {}),
      cachePrediction,
    };
  }

  /** The slot mirror sends token ids: they must be the server's (its /tokenize shape found). */
  private async tokenizeShapeKnown(): Promise<void> {
    const shape = this.tokenizer.shape ?? (await this.tokenizer.detectShape());
    if (shape === "none") throw new EngineUnavailableError("llama-server's /tokenize returned no tokens");
  }

  /** The LRU model: the prompt is cached, the least recently used runs make room for it. */
  private rememberLru(tokens: Tokens): void {
    const now = ++this.lruTick;
    const need = tokens.length - this.lru.match(tokens);
    if (need > this.lru.free()) this.lru.evict(need - this.lru.free());
    this.lru.insert(tokens, now);
  }

  /** Calls `onChange` as KV events change the cache, or when an abort's read-back outlasts its run. */
  watchCache(onChange: () => void): () => void {
    if (!this.cacheModel && !this.slotCache) return () => {};
    const off = this.cacheModel ? this.cacheModel.watch(onChange) : this.slotCache!.watch(onChange);
    this.withheldListeners.add(onChange);
    return () => {
      off();
      this.withheldListeners.delete(onChange);
    };
  }

  /** Engine-managed (KV events, llama-server slots): what the server caches now, as known. */
  cachedSequences(): Tokens[] {
    if (this.withheld !== undefined) return [];
    return this.cacheModel?.sequences() ?? this.slotCache?.sequences() ?? [];
  }

  /** How the server's cache is modelled, and the predictions' accuracy so far. */
  cacheStatus(): RemoteCacheStatus {
    const mode = this.slotCache ? "llama-slots" : this.cacheModel ? "kv-events" : "lru";
    return {
      mode,
      accuracy: this.tally.snapshot(),
      ...(this.slotCache ? { llamaSlots: this.slotCache.status() } : {}),
      ...(this.cacheModel ? { kvEvents: this.cacheModel.status() } : {}),
      ...(this.withheld !== undefined ? { withheld: this.withheld } : {}),
    };
  }

  /**
   * With `kvEvents`: whether the mirror is exact (and why not), the stream's state, and the mirror's
   * prediction accuracy (predicted vs server-reported cached tokens); /cluster shows it under
   * `engineCache.kvEvents` (cacheStatus).
   */
  kvEventsStatus(): KvEventsStatus | undefined {
    return this.cacheModel?.status();
  }

  /**
   * Checks the server and, for an engine-managed cache, stops advertising it while the server is
   * unreachable; when it answers again, the llama-server slot mirror first reads `/slots` (a restart
   * found there clears it) before the cache is offered again.
   */
  async health(): Promise<{ ok: boolean; detail?: string }> {
    const h = await this.checkServer();
    if (!this.cacheModel && !this.slotCache) return h;
    if (!h.ok) {
      // Back up, it may be a new server: the slots are read before anything is offered again.
      this.slotCache?.resyncNext();
      this.withhold(`the server is unreachable: ${h.detail ?? "unhealthy"}`);
    } else if (this.withheld !== undefined) {
      if (this.slotCache && !(await this.slotCache.recheck())) return h;
      this.withhold(undefined);
    }
    return h;
  }

  private withhold(why: string | undefined): void {
    const changed = (this.withheld === undefined) !== (why === undefined);
    this.withheld = why;
    if (changed) for (const fn of this.withheldListeners) fn();
  }

  private async checkServer(): Promise<{ ok: boolean; detail?: string }> {
    for (const path of ["/health", "/v1/models"]) {
      try {
        // vLLM answers /health with an empty 200, llama.cpp with JSON: the status is what counts.
        const res = await this.http.send("GET", path);
        await res.body.dump();
        // A server that was down when the engine was created: read its context now.
        if (this.contextFrom === "configured") await this.readServerContext().catch(() => undefined);
        if (this.salt.unknown) await this.salt.learn();
        return { ok: true };
      } catch (e) {
        if (!(e instanceof EngineInputError)) return { ok: false, detail: (e as Error).message };
      }
    }
    return { ok: false, detail: "neither /health nor /v1/models answered" };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.slotCache?.close();
    await this.http.close(); // runs cut first: none ends after the mirror stopped
    await this.cacheModel?.close();
  }
}
