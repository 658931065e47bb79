/**
 * The remote engine's `/v1/completions` run: its request body, and its stream, read within bounds
 * into the text, the finish reason, and the server's usage and timings.
 */
import { z } from "zod";
import type { EngineChunk, EngineRequest } from "../../core/engine.js";
import { EngineUnavailableError } from "../errors.js";
import type { HttpClient } from "../http-client.js";
import { samplingFields } from "../sampling-fields.js";
import { sseData } from "../sse.js";
import { appendOutput, streamFailure } from "../stream-output.js";

const StreamChunk = z.object({
  choices: z
    .array(
      z.object({
        text: z.string().nullish(),
        finish_reason: z.string().nullish(),
      }),
    )
    .optional(),
  usage: z
    .object({
      prompt_tokens: z.number().optional(),
      completion_tokens: z.number().optional(),
      prompt_tokens_details: z.object({ cached_tokens: z.number().nullish() }).nullish(),
    })
    .nullish(),
  timings: z
    .object({
      cache_n: z.number().optional(),
      prompt_n: z.number().optional(),
      prompt_ms: z.number().optional(),
      predicted_ms: z.number().optional(),
    })
    .nullish(),
  // A failure mid-stream: vLLM and llama-server send `{"error": {…}}`, older vLLM `{"object": "error",
  // …}`. Unknown, not string: a server's `"object": null` or `"error": null` on a normal chunk must still
  // parse.
  error: z.unknown().optional(),
  object: z.unknown().optional(),
  message: z.unknown().optional(),
});

/** The streamed `/v1/completions` body of `req` for `model`, with `prompt` as text or the server's ids. */
export function completionsBody(req: EngineRequest, model: string, prompt: string | number[]): object {
  return {
    // vLLM serves a LoRA adapter as a model of its own name; `cache_salt` is vLLM's tenant field
    // (servers that do not know it ignore it, and then share their cache across tenants).
    model: req.adapter ?? model,
    ...(req.cacheSalt !== undefined ? { cache_salt: req.cacheSalt } : {}),
    prompt,
    max_tokens: req.maxTokens,
    ...samplingFields(req),
    stream: true,
    stream_options: { include_usage: true },
  };
}

/** What the stream said, and when it began (before the request), showed its first text, and ended. */
export interface StreamedCompletions {
  text: string;
  chunks: number;
  finish: string | undefined;
  usage: z.infer<typeof StreamChunk>["usage"];
  timings: z.infer<typeof StreamChunk>["timings"];
  t0: number;
  firstAt: number;
  end: number;
}

/** Sends `body` to `/v1/completions` and reads its stream to the end. */
export async function streamCompletions(
  http: HttpClient,
  body: object,
  onChunk: ((c: EngineChunk) => void) | undefined,
  signal: AbortSignal | undefined,
): Promise<StreamedCompletions> {
  const t0 = performance.now();
  const res = await http.send("POST", "/v1/completions", body, signal);
  let text = "";
  let firstAt = 0;
  let chunks = 0;
  let finish: string | undefined;
  let usage: z.infer<typeof StreamChunk>["usage"];
  let timings: z.infer<typeof StreamChunk>["timings"];
  try {
    for await (const data of sseData(res.body)) {
      let json: unknown;
      try {
        json = JSON.parse(data);
      } catch {
        throw new EngineUnavailableError(`malformed stream event from server: ${data.slice(0, 120)}`);
      }
      const parsed = StreamChunk.safeParse(json);
      if (!parsed.success)
        throw new EngineUnavailableError(`unexpected stream event shape: ${data.slice(0, 120)}`);
      const ev = parsed.data;
      if (ev.error != null || ev.object === "error") {
        const why = JSON.stringify(ev.error ?? ev.message ?? "no reason given");
        throw new EngineUnavailableError(`server failed mid-stream: ${why.slice(0, 200)}`);
      }
      if (ev.usage) usage = ev.usage;
      if (ev.timings) timings = ev.timings;
      const choice = ev.choices?.[0];
      if (choice?.finish_reason) finish = choice.finish_reason;
      if (choice?.text) {
        if (firstAt === 0) firstAt = performance.now();
        chunks++;
        text = appendOutput(text, choice.text);
        onChunk?.({ text: choice.text });
      }
    }
  } catch (e) {
    res.body.destroy();
    throw streamFailure(e, signal, http.bodyTimeoutMs);
  }
  const end = performance.now();
  return { text, chunks, finish, usage, timings, t0, firstAt, end };
}
