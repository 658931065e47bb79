/** Builders for OpenAI-shaped responses, stream chunks and errors (so the official client parses them). */
import type { ServeOutcome, ServeTiming } from "../service.js";
import type { ApiErrorCode } from "./error-codes.js";

export type ApiKind = "completion" | "chat";

/** OpenAI's error code for a prompt (or prompt + max_tokens) beyond the model's context. */
export const CONTEXT_LENGTH_EXCEEDED: ApiErrorCode = "context_length_exceeded";

export interface ResponseMeta {
  id: string;
  created: number;
  model: string;
}

function usageOf(o: ServeOutcome) {
  const r = o.result;
  return {
    prompt_tokens: r.promptTokens,
    completion_tokens: r.completionTokens,
    total_tokens: r.promptTokens + r.completionTokens,
    prompt_tokens_details: { cached_tokens: r.cachedTokens },
  };
}

/** Milliseconds to the microsecond: enough for a breakdown, and short in JSON. */
const ms = (x: number) => Math.round(x * 1000) / 1000;

/** A request's time breakdown as the API reports it: milliseconds, rounded once. */
export function timingMs(t: ServeTiming) {
  return {
    queue: ms(t.queueMs),
    prefill: ms(t.prefillMs),
    decode: ms(t.decodeMs),
    network: ms(t.networkMs),
    total: ms(t.totalMs),
  };
}
export type TimingMs = ReturnType<typeof timingMs>;

/**
 * Our own extension field: which node served the request, how far away it was, how many attempts
 * failed first, and where the time went.
 */
export function prefixmeshField(o: ServeOutcome, timing = timingMs(o.timing)) {
  return {
    served_by: o.servedBy,
    hops: o.hops,
    request_id: o.reqId,
    fallbacks: o.fallbacks,
    timing_ms: timing,
  };
}

export type PrefixmeshField = ReturnType<typeof prefixmeshField>;

/**
 * The same breakdown as a Server-Timing header (W3C Server Timing; browsers' developer tools show
 * it): `queue;dur=…, prefill;dur=…, decode;dur=…, network;dur=…, total;dur=…`.
 */
export function serverTiming(t: TimingMs): string {
  return `queue;dur=${t.queue}, prefill;dur=${t.prefill}, decode;dur=${t.decode}, network;dur=${t.network}, total;dur=${t.total}`;
}

export function fullResponse(kind: ApiKind, meta: ResponseMeta, o: ServeOutcome, timing: TimingMs) {
  // Object literals with every field written out (no spreads): this runs once per request, and a
  // spread made it many times slower (BENCHMARKS.md, "Router overhead").
  const finish_reason = o.result.finishReason;
  if (kind === "completion") {
    return {
      id: meta.id,
      object: "text_completion",
      created: meta.created,
      model: meta.model,
      choices: [{ index: 0, text: o.result.text, logprobs: null, finish_reason }],
      usage: usageOf(o),
      prefixmesh: prefixmeshField(o, timing),
    };
  }
  return {
    id: meta.id,
    object: "chat.completion",
    created: meta.created,
    model: meta.model,
    choices: [
      {
        index: 0,
        message: { role: "assistant", content: o.result.text, refusal: null },
        logprobs: null,
        finish_reason,
      },
    ],
    usage: usageOf(o),
    prefixmesh: prefixmeshField(o, timing),
  };
}

/**
 * One SSE chunk; `text` undefined with a finish reason is the final choice chunk. The final one also
 * gets the whole field (hops, fallbacks, where the time went), so a streaming client has it without
 * asking for the usage chunk; the others carry only the node whose output they are.
 */
export function streamChunk(
  kind: ApiKind,
  meta: ResponseMeta,
  piece: { text?: string; first?: boolean; finishReason?: string | null; servedBy: string },
  /** The final chunk's: the whole field (prefixmeshField), built once per answer by the caller. */
  whole?: PrefixmeshField,
) {
  // Written out, no spreads: this runs once per streamed piece.
  const finish_reason = piece.finishReason ?? null;
  const prefixmesh = whole ?? { served_by: piece.servedBy };
  if (kind === "completion") {
    return {
      id: meta.id,
      object: "text_completion",
      created: meta.created,
      model: meta.model,
      choices: [{ index: 0, text: piece.text ?? "", logprobs: null, finish_reason }],
      prefixmesh,
    };
  }
  const delta: Record<string, string> = {};
  if (piece.first) delta.role = "assistant";
  if (piece.text !== undefined) delta.content = piece.text;
  return {
    id: meta.id,
    object: "chat.completion.chunk",
    created: meta.created,
    model: meta.model,
    choices: [{ index: 0, delta, logprobs: null, finish_reason }],
    prefixmesh,
  };
}

export function usageChunk(kind: ApiKind, meta: ResponseMeta, o: ServeOutcome, prefixmesh: PrefixmeshField) {
  return {
    id: meta.id,
    created: meta.created,
    model: meta.model,
    object: kind === "completion" ? "text_completion" : "chat.completion.chunk",
    choices: [],
    usage: usageOf(o),
    prefixmesh,
  };
}

export function errorBody(
  message: string,
  type: string,
  param: string | null = null,
  code: ApiErrorCode | null = null,
) {
  return { error: { message, type, param, code } };
}
