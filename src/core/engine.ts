/**
 * The Engine port: what a node needs from an inference engine. Real engines (src/engines) and the
 * simulated engine (src/sim) implement it. Types only, so core stays free of I/O.
 *
 * Cache contract. A node's exact tree (the paper's Trie_i) must mirror what the engine caches. Two
 * kinds of engine exist:
 *  - node-managed caches (`cacheMode: "node-managed"`): the node decides evictions with its tree
 *    (Algorithm 1, lines 7-10) and tells the engine to free the same runs (`evict`). The simulated
 *    engine and remote engines (whose cache the node approximates by LRU) work this way.
 *  - engine-managed caches (`cacheMode: "engine-managed"`): the engine decides (e.g. llama.cpp
 *    slots + saved states) and reports its complete cached sequences after each run
 *    (`EngineResult.cachedSequences`), which the node mirrors exactly.
 */

/** Token ids. Always a Uint32Array so trees, codecs and engines share one representation. */
export type Tokens = Uint32Array;

/**
 * A run of tokens removed from a cache: tokens [keep, path.length) of the sequence `path` are gone,
 * tokens [0, keep) stay. The node's tree returns these from `evict` and engines free the same KV.
 */
export interface EvictedRun {
  path: Tokens;
  keep: number;
}

export interface ChatMessage {
  role: "system" | "user" | "assistant" | "tool" | "developer";
  content: string;
}

export interface EngineRequest {
  /** Unique per request across the cluster (origin node id + counter). */
  id: string;
  /** The full prompt as tokens, after any chat template: the routing key. */
  tokens: Tokens;
  /** The same prompt as text, for engines that take text (remote servers). */
  prompt?: string;
  maxTokens: number;
  temperature?: number;
  topP?: number;
  seed?: number;
  /**
   * OpenAI's `presence_penalty` and `frequency_penalty` (-2…2; unset: 0) on tokens already generated:
   * deterministic, so a greedy request stays greedy (the same prompt and penalties, the same answer).
   */
  presencePenalty?: number;
  frequencyPenalty?: number;
  stop?: string[];
  /**
   * The tenant's cache salt (vLLM's `cache_salt`): requests of different salts never reuse each
   * other's cached prefixes (src/core/namespace.ts). Remote engines that know the field get it.
   */
  cacheSalt?: string;
  /**
   * The model the client asked for, when it named one: the request runs only on a node serving it
   * (src/core/node/models.ts). Undefined: any node of the mesh.
   */
  model?: string;
  /**
   * The model whose tokenizer made `tokens`, when the entry node does not serve `model`: the serving
   * node tokenizes `prompt` again with its own (the tokens were only good for routing).
   */
  tokenizer?: string;
  /**
   * A chat's messages, with `tokenizer`: the entry node rendered `prompt` with its own model's chat
   * template, so the serving node renders them again with its own before it tokenizes.
   */
  messages?: ChatMessage[];
  /** The LoRA adapter to run (a model name the engine serves besides its base model); a namespace too. */
  adapter?: string;
  /**
   * The client's request id (its `x-request-id`) at the entry node: carried on forwards so the serving
   * node's log names the same request. Opaque to routing and engines.
   */
  traceId?: string;
  /**
   * The client's deadline: ms from the request's arrival at the entry node within which it wants its
   * answer (core/node/deadline.ts). Read by the entry node only: forwards carry what is left of it
   * as their own `deadlineMs`.
   */
  deadlineMs?: number;
  /**
   * The client takes its answer as a stream, so text our own run sent it cannot be taken back: a
   * hedged answer is taken only before that run starts (core/node/hedge.ts). Entry node only: never
   * forwarded.
   */
  stream?: boolean;
}

export interface EngineResult {
  text: string;
  /** Tokens generated (may be empty if the engine does not report them). */
  completionTokens: number;
  promptTokens: number;
  /** Prompt tokens whose KV was reused from cache: the actual hit. */
  cachedTokens: number;
  prefillMs: number;
  decodeMs: number;
  finishReason: "stop" | "length";
  /** engine-managed caches only: every sequence now cached, after this run. */
  cachedSequences?: Tokens[];
}

/** One streamed piece of output. */
export interface EngineChunk {
  text: string;
}

export interface EngineInfo {
  /** e.g. "llamacpp", "openai", "sim". */
  kind: string;
  /** Model identity; peers must agree on it. */
  model: string;
  /** KV capacity in tokens (the node's tree capacity). */
  capacityTokens: number;
  cacheMode: "node-managed" | "engine-managed";
  /** Largest prompt + output the engine accepts, in tokens. */
  maxContextTokens: number;
  /**
   * false: the engine runs from `EngineRequest.tokens` alone, so peers may leave the prompt text out
   * of what they forward here (remote servers take text: true).
   */
  needsPromptText: boolean;
  /**
   * `run` honours its signal and says what an aborted run left cached, so the node's tree agrees:
   * node-managed, the leading tokens of the request's cache key it kept (its rejection's
   * `keptTokens`: what its prefill got through); engine-managed, `cachedSequences()`. Absent:
   * never aborted mid-run (the run goes to its end even when nobody takes its answer).
   */
  abortable?: boolean;
}

export interface Engine {
  readonly info: EngineInfo;
  /** `signal` abandons a remote tokenize (its request is aborted); local tokenizers may ignore it. */
  tokenize(text: string, signal?: AbortSignal): Promise<Tokens>;
  /**
   * Renders chat messages with the model's chat template into the prompt text; `signal` abandons a
   * remote rendering (its request is aborted), local ones may ignore it.
   */
  applyChatTemplate(messages: ChatMessage[], signal?: AbortSignal): Promise<string>;
  /** Runs one request to completion; `onChunk` receives output as it is produced. */
  run(req: EngineRequest, onChunk?: (c: EngineChunk) => void, signal?: AbortSignal): Promise<EngineResult>;
  /** node-managed caches only: free the KV of these runs, exactly as the node's tree evicted them. */
  evict?(runs: EvictedRun[]): void;
  /**
   * engine-managed caches only: drop everything cached, after any queued runs, as a restart would: the
   * next run's `cachedSequences` holds only what that run cached. Lets benchmarks compare routing
   * policies from the same cold cache without restarting the engine.
   */
  resetCache?(): Promise<void>;
  /**
   * engine-managed caches that change between runs (a server's KV events): calls `onChange` after
   * each change (possibly many in a row: coalesce) until the returned function is called.
   */
  watchCache?(onChange: () => void): () => void;
  /** engine-managed caches: every sequence cached now (what the next `cachedSequences` would say). */
  cachedSequences?(): Tokens[];
  /**
   * Why this engine cannot keep a request's namespace (`cacheSalt`, `adapter`) apart from others'
   * in its cache, when it cannot (the node refuses such a request rather than share a cache);
   * undefined: it can. Absent: every namespace is kept apart.
   */
  namespaceProblem?(r: Pick<EngineRequest, "cacheSalt" | "adapter">): string | undefined;
  health(): Promise<{ ok: boolean; detail?: string }>;
  close(): Promise<void>;
}
