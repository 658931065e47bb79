/**
 * The contract between the HTTP API (src/server/api.ts) and whatever serves requests (the node runtime
 * in production, a fake inside tests). The API only parses, validates and formats; it never routes.
 */
import type { ChatMessage, EngineResult, Tokens } from "../core/engine.js";
import type { RequestRecord } from "../core/node/types.js";
import type { ApiErrorCode } from "./openai/error-codes.js";

export interface InferenceInput {
  /** Prompt text after any chat template: exactly what was tokenized. */
  prompt: string;
  tokens: Tokens;
  maxTokens: number;
  temperature?: number;
  topP?: number;
  seed?: number;
  /** OpenAI's penalties, -2…2 (0, the default, is left out). */
  presencePenalty?: number;
  frequencyPenalty?: number;
  stop?: string[];
  /** The tenant's cache salt (`cache_salt`). */
  cacheSalt?: string;
  /** The LoRA adapter the request's `model` named (one of `NodeService.adapters`). */
  adapter?: string;
  /** The model the client named, when the request must run on a node serving it (mixed meshes). */
  model?: string;
  /** This node's model, when it does not serve `model`: its tokens are for routing only. */
  tokenizer?: string;
  /** A chat's messages, with `tokenizer`: the serving node applies its own model's chat template. */
  messages?: ChatMessage[];
  /** The client's request id (`x-request-id`), carried to the serving node for its logs. */
  requestId?: string;
  /** The client's deadline, ms from now (`x-prefixmesh-deadline-ms`; core/node/deadline.ts). */
  deadlineMs?: number;
}

export interface ServeOutcome {
  reqId: string;
  result: EngineResult;
  /** Node that ran the engine. */
  servedBy: string;
  /** Network hops from this node to the serving node (0 = served locally). */
  hops: number;
  /** Where the request's time went, as the entry node saw it (the paper's §5 per-request record). */
  timing: ServeTiming;
  /** Forward attempts that failed before the one that answered. */
  fallbacks: number;
}

/**
 * Milliseconds of one request, from the node's per-request record: queue, prefill and decode at the
 * serving engine; network = the rest (routing, peer round trips, failed attempts); total.
 */
export type ServeTiming = Pick<RequestRecord, "queueMs" | "prefillMs" | "decodeMs" | "networkMs" | "totalMs">;

export interface ServeEvents {
  /**
   * Output as it is produced, with the node producing it; absent when the client takes the answer
   * whole (nothing partial is ever sent, so a fallback never has a stream to continue or break).
   */
  onChunk?(text: string, servedBy: string): void;
}

/**
 * The API's side of one request: the service sets `onGone`, and the API calls it once if the client
 * hangs up before its answer. Not an AbortSignal: an EventTarget and a listener per request were a
 * visible share of the router's own overhead (BENCHMARKS.md, "Router overhead").
 */
export interface ClientLink {
  onGone?: (() => void) | undefined;
}

/** A failure the API reports to the client with an HTTP status (overload, timeouts, engine errors). */
export class ServiceError extends Error {
  constructor(
    readonly status: number,
    readonly type: string,
    message: string,
    readonly retryAfterSec?: number,
    readonly code?: ApiErrorCode,
  ) {
    super(message);
    this.name = "ServiceError";
  }
}

/**
 * A client request the node took in before its prompt was templated and tokenized: a node shutting
 * down drains it like a submitted one. The API ends it once the request is submitted or has failed.
 */
export interface Admission {
  end(): void;
}

export interface NodeService {
  readonly nodeId: string;
  readonly modelId: string;
  /** LoRA adapters the engine serves besides `modelId`: a request names one as its `model`. */
  readonly adapters?: readonly string[];
  /** Every model of the mesh and the nodes serving it, this node's own first (mixed meshes). */
  meshModels?(): { id: string; nodes: string[]; adapter: boolean }[];
  /** Largest prompt + output accepted, in tokens. */
  readonly maxContextTokens: number;
  /** `gone`: aborted when the client hangs up, which ends the engine's call for it too. */
  tokenize(text: string, gone?: AbortSignal): Promise<Tokens>;
  applyChatTemplate(messages: ChatMessage[], gone?: AbortSignal): Promise<string>;
  /**
   * Takes a client request in, before its template and tokenize, so the shutdown drain waits for it
   * too; throws ServiceError 503 once shutdown has begun, 429 when `--max-pending` is reached, and a
   * request it `serves` (not a `/tokenize`) the 503 submit would give while the node starts or resets.
   */
  admit?(serves?: boolean): Admission;
  /**
   * Serves one request exactly once. Rejects with ServiceError (e.g. 429 on overload). A request
   * `admit` took in before shutdown is still served while the node drains.
   */
  submit(
    input: InferenceInput,
    events: ServeEvents,
    link: ClientLink,
    admission?: Admission,
  ): Promise<ServeOutcome>;
  /** Liveness of the serving path: engine loaded, local route usable. */
  ready(): { ok: boolean; detail?: string };
  /** This node's view of the cluster for GET /cluster (JSON-serialisable). */
  clusterView(): unknown;
  /** Switches the routing policy (admin endpoint); throws ServiceError on an unknown policy. */
  setPolicy?(name: string): void;
  /** Empties this node's cache and starts a new epoch (admin: fair policy comparisons). */
  resetCache?(): Promise<void>;
}
