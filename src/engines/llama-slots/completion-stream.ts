/**
 * One run on llama-server's native `/completion` in a chosen slot: the request (`id_slot`,
 * `cache_prompt`, `return_tokens`) and its stream, which carries the generated token ids and, in its
 * final event, the server's `cache_n` and timings. The slot cache does the bookkeeping around it.
 */
import { z } from "zod";
import type { EngineChunk, Tokens } from "../../core/engine.js";
import { EngineUnavailableError } from "../errors.js";
import type { HttpClient } from "../http-client.js";
import type { SamplingFields } from "../sampling-fields.js";
import { sseData } from "../sse.js";
import { appendOutput, streamFailure } from "../stream-output.js";

const TokenId = z
  .number()
  .int()
  .min(0)
  .max(2 ** 32 - 1);
/** Generated ids a run may bring beyond `n_predict` (a speculative step's overshoot) before it fails. */
const EXTRA_TOKENS = 1024;
const NativeChunk = z.object({
  content: z.string().optional(),
  tokens: z
    .array(TokenId)
    .max(1 << 20)
    .optional(),
  stop: z.boolean().optional(),
  stop_type: z.string().optional(),
  tokens_cached: z.number().int().min(0).optional(),
  tokens_predicted: z.number().int().min(0).optional(),
  tokens_evaluated: z.number().int().min(0).optional(),
  timings: z
    .object({
      cache_n: z.number().int().min(0).optional(),
      prompt_ms: z.number().optional(),
      predicted_ms: z.number().optional(),
    })
    .nullish(),
  error: z.unknown().optional(),
});
export type NativeFinal = z.infer<typeof NativeChunk>;

export interface SlotCompletion {
  slot: number;
  tokens: Tokens;
  maxTokens: number;
  sampling: SamplingFields;
  /** false: the server computes the whole prompt, whatever the slot holds. */
  reuse: boolean;
}

/** What the stream said: its text, the generated ids, its final event, and when it began and ended. */
export interface StreamedCompletion {
  text: string;
  generated: number[];
  final: NativeFinal;
  t0: number;
  firstAt: number;
  end: number;
}

/**
 * Sends the run, calls `launched` once the server's response began (its first event, with the server's
 * prompt time when it gave one), and reads its stream to the end.
 */
export async function streamCompletion(
  http: HttpClient,
  run: SlotCompletion,
  launched: (promptMs: number | undefined) => void,
  onChunk: ((c: EngineChunk) => void) | undefined,
  signal: AbortSignal | undefined,
): Promise<StreamedCompletion> {
  const { slot, tokens, maxTokens, sampling, reuse } = run;
  const body = {
    ...sampling,
    prompt: Array.from(tokens),
    // The output limit: /v1/completions' `max_tokens` under llama-server's native name.
    n_predict: maxTokens,
    id_slot: slot,
    // false: the server computes the whole prompt (n_past = 0), whatever the slot holds.
    cache_prompt: reuse,
    return_tokens: true,
    // The first event's prompt time bounds when the server started the run (slot-cache.ts).
    timings_per_token: true,
    stream: true,
  };
  const t0 = performance.now();
  // llama-server closes the connection after a stream: never reuse it (a reuse races the close).
  const res = await http.send("POST", "/completion", body, signal, true);
  let began = false;
  const begin = (promptMs?: number) => {
    if (began) return;
    began = true;
    launched(promptMs);
  };
  let text = "";
  const generated: number[] = [];
  let firstAt = 0;
  let final: NativeFinal | undefined;
  try {
    for await (const data of sseData(res.body)) {
      const parsed = NativeChunk.safeParse(safeJson(data));
      if (!parsed.success)
        throw new EngineUnavailableError(`unexpected stream event from llama-server: ${data.slice(0, 120)}`);
      const ev = parsed.data;
      begin(ev.timings?.prompt_ms);
      if (ev.error !== undefined)
        throw new EngineUnavailableError(`llama-server: ${JSON.stringify(ev.error).slice(0, 200)}`);
      if (ev.tokens) for (const t of ev.tokens) generated.push(t);
      // The text is bounded (appendOutput), ids that come without text are not: n_predict bounds them.
      if (generated.length > maxTokens + EXTRA_TOKENS)
        throw new EngineUnavailableError(
          `llama-server sent ${generated.length} generated tokens for n_predict ${maxTokens}`,
        );
      if (ev.content) {
        if (firstAt === 0) firstAt = performance.now();
        text = appendOutput(text, ev.content);
        onChunk?.({ text: ev.content });
      }
      if (ev.stop) final = ev;
    }
  } catch (e) {
    begin();
    res.body.destroy();
    throw streamFailure(e, signal, http.bodyTimeoutMs);
  }
  begin();
  if (!final) throw new EngineUnavailableError("llama-server's stream ended without its final event");
  const end = performance.now();
  return { text, generated, final, t0, firstAt, end };
}

function safeJson(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    return undefined;
  }
}
