/** Builders for OpenAI-shaped responses, stream chunks and errors (so the official client parses them). */
import type { ServeOutcome, ServeTiming } from "../service.js";

export type ApiKind = "completion" | "chat";

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

/**
 * Our own extension field: which node served the request, how far away it was, how many attempts
 * failed first, and where the time went.
 */
function prefixmeshField(o: ServeOutcome) {
  const t = o.timing;
  return {
    served_by: o.servedBy,
    hops: o.hops,
    request_id: o.reqId,
    fallbacks: o.fallbacks,
    timing_ms: t
      ? {
          queue: ms(t.queueMs),
          prefill: ms(t.prefillMs),
          decode: ms(t.decodeMs),
          network: ms(t.networkMs),
          total: ms(t.totalMs),
        }
      : undefined,
  };
}

/**
 * The same breakdown as a Server-Timing header (W3C Server Timing; browsers' developer tools show
 * it): `queue;dur=…, prefill;dur=…, decode;dur=…, network;dur=…, total;dur=…`.
 */
export function serverTiming(t: ServeTiming): string {
  return `queue;dur=${ms(t.queueMs)}, prefill;dur=${ms(t.prefillMs)}, decode;dur=${ms(t.decodeMs)}, network;dur=${ms(t.networkMs)}, total;dur=${ms(t.totalMs)}`;
}

export function fullResponse(kind: ApiKind, meta: ResponseMeta, o: ServeOutcome) {
  // Object literals with every field written out (no spreads): this runs once per request, and a
  // spread made it ~10× slower.
  const finish_reason = o.result.finishReason;
  if (kind === "completion") {
    return {
      id: meta.id,
      object: "text_completion",
      created: meta.created,
      model: meta.model,
      choices: [{ index: 0, text: o.result.text, logprobs: null, finish_reason }],
      usage: usageOf(o),
      prefixmesh: prefixmeshField(o),
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
    prefixmesh: prefixmeshField(o),
  };
}

/** One SSE chunk; `text` undefined with a finish reason is the final choice chunk. */
export function streamChunk(
  kind: ApiKind,
  meta: ResponseMeta,
  piece: { text?: string; first?: boolean; finishReason?: string | null; servedBy: string },
) {
  // Written out, no spreads: this runs once per streamed piece.
  const finish_reason = piece.finishReason ?? null;
  if (kind === "completion") {
    return {
      id: meta.id,
      object: "text_completion",
      created: meta.created,
      model: meta.model,
      choices: [{ index: 0, text: piece.text ?? "", logprobs: null, finish_reason }],
      prefixmesh: { served_by: piece.servedBy },
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
    prefixmesh: { served_by: piece.servedBy },
  };
}

export function usageChunk(kind: ApiKind, meta: ResponseMeta, o: ServeOutcome) {
  return {
    id: meta.id,
    created: meta.created,
    model: meta.model,
    object: kind === "completion" ? "text_completion" : "chat.completion.chunk",
    choices: [],
    usage: usageOf(o),
    prefixmesh: prefixmeshField(o),
  };
}

export function errorBody(
  message: string,
  type: string,
  param: string | null = null,
  code: string | null = null,
) {
  return { error: { message, type, param, code } };
}
