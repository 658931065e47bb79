/**
 * Before a bench starts: how many of its requests fit the model's context (prompt + max_tokens), counted
 * with the node's own tokenizer (`POST /tokenize`) against the context it states (`max_model_len` in
 * `GET /v1/models`). Requests that do not fit are refused by the nodes (context_length_exceeded); saying
 * so beforehand beats a run whose results quietly leave half the workload out.
 */
import { Pool } from "undici";
import type { Workload, WorkloadRequest } from "../workload/types.js";
import { promptText } from "./replay.js";

/** Distinct prompts tokenized at most: the check stays a moment however long the workload. */
export const MAX_CHECKED_PROMPTS = 2000;
const CHECK_CONCURRENCY = 4;
/** Waits, in all, on a node that answers 429 to the one request left asking: then the check gives up. */
const BUSY_WAITS = 20;
/** Longest wait a node's Retry-After is taken for, between them. */
const BUSY_WAIT_MAX_MS = 5_000;

/** A node's 429: it bounds the requests (`/tokenize` too) it takes at once (`--max-pending`). */
class Busy extends Error {
  constructor(
    message: string,
    readonly retryAfterMs: number,
  ) {
    super(message);
  }
}

export type ContextFit =
  | {
      known: true;
      contextTokens: number;
      /** Requests whose prompt was counted (all, unless the workload has more distinct prompts than the cap). */
      checked: number;
      tooLong: number;
      /** Longest prompt + max_tokens among the checked requests. */
      longest: number;
    }
  | { known: false; reason: string };

/** A request does not fit when the node would refuse it: the API's own rule (src/server/api.ts). */
export function fits(promptTokens: number, maxTokens: number, contextTokens: number): boolean {
  return promptTokens < contextTokens && promptTokens + maxTokens <= contextTokens;
}

/** The fit of each request given a token count per prompt text (`count` answers undefined: not counted). */
export function summarizeFit(
  requests: readonly WorkloadRequest[],
  count: (text: string) => number | undefined,
  contextTokens: number,
): Extract<ContextFit, { known: true }> {
  let checked = 0;
  let tooLong = 0;
  let longest = 0;
  for (const r of requests) {
    const n = count(promptText(r));
    if (n === undefined) continue;
    checked++;
    longest = Math.max(longest, n + r.maxTokens);
    if (!fits(n, r.maxTokens, contextTokens)) tooLong++;
  }
  return { known: true, contextTokens, checked, tooLong, longest };
}

async function getJson(pool: Pool, method: "GET" | "POST", path: string, body?: unknown): Promise<unknown> {
  const res = await pool.request({
    method,
    path,
    headers: body === undefined ? {} : { "content-type": "application/json" },
    body: body === undefined ? null : JSON.stringify(body),
    signal: AbortSignal.timeout(10_000),
  });
  const text = await res.body.text();
  if (res.statusCode === 429) {
    const after = Number(res.headers["retry-after"]);
    const ms = Number.isFinite(after) && after > 0 ? after * 1000 : 1000;
    throw new Busy(`${method} ${path}: HTTP 429`, Math.min(ms, BUSY_WAIT_MAX_MS));
  }
  if (res.statusCode !== 200) throw new Error(`${method} ${path}: HTTP ${res.statusCode}`);
  return JSON.parse(text);
}

/** Asks the node at `url`; any failure to learn the context or the counts is `known: false`, with why. */
export async function checkContextFit(url: string, model: string, workload: Workload): Promise<ContextFit> {
  const pool = new Pool(new URL(url).origin, { connections: CHECK_CONCURRENCY });
  try {
    let contextTokens: number | undefined;
    try {
      const models = (await getJson(pool, "GET", "/v1/models")) as {
        data?: { id?: string; max_model_len?: unknown }[];
      };
      const m = models.data?.find((d) => d.id === model) ?? models.data?.[0];
      if (typeof m?.max_model_len === "number" && m.max_model_len > 0) contextTokens = m.max_model_len;
    } catch (err) {
      return { known: false, reason: `GET /v1/models failed: ${(err as Error).message}` };
    }
    if (contextTokens === undefined) return { known: false, reason: "the node does not state its context" };

    const texts = [...new Set(workload.requests.map(promptText))].slice(0, MAX_CHECKED_PROMPTS);
    const counts = new Map<string, number>();
    let next = 0;
    // Prompts a node refused for now (429), asked again first.
    const again: string[] = [];
    let running = CHECK_CONCURRENCY;
    let busyWaits = 0;
    const worker = async () => {
      try {
        for (;;) {
          const text = again.pop() ?? texts[next++];
          if (text === undefined) return;
          try {
            const r = (await getJson(pool, "POST", "/tokenize", { model, prompt: text })) as {
              count?: unknown;
            };
            if (typeof r.count !== "number") throw new Error("POST /tokenize: no token count in the answer");
            counts.set(text, r.count);
          } catch (err) {
            if (!(err instanceof Busy)) throw err;
            again.push(text);
            // The node takes fewer at once than we ask (a low --max-pending, or other clients' load):
            // ask fewer at once, down to one that waits as the node says.
            if (running > 1) return;
            if (++busyWaits > BUSY_WAITS) throw err;
            await new Promise((r) => setTimeout(r, err.retryAfterMs));
          }
        }
      } finally {
        running--;
      }
    };
    try {
      await Promise.all(Array.from({ length: CHECK_CONCURRENCY }, worker));
    } catch (err) {
      return { known: false, reason: (err as Error).message };
    }
    return summarizeFit(workload.requests, (t) => counts.get(t), contextTokens);
  } finally {
    await pool.close();
  }
}

/** The warning `prefixmesh bench` prints before it starts, or undefined when every checked request fits. */
export function fitWarning(fit: ContextFit, model: string, total: number): string | undefined {
  if (!fit.known)
    return `note: could not check beforehand that the prompts fit the model's context (${fit.reason})`;
  if (fit.tooLong === 0) return undefined;
  const share = ((100 * fit.tooLong) / fit.checked).toFixed(0);
  const of = fit.checked === total ? `${total}` : `${fit.checked} checked (of ${total})`;
  return (
    `warning: ${fit.tooLong} of ${of} requests (${share}%) do not fit model ${model}'s context of ` +
    `${fit.contextTokens} tokens (prompt + max_tokens, counted by the node; the longest needs ${fit.longest}). ` +
    "The nodes will refuse them (context_length_exceeded) and the results leave them out. " +
    "Give the engine a longer context (llamacpp: --slot-context, up to the model's own) or pick another workload."
  );
}
