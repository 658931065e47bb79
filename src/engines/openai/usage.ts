/**
 * The counts and times a server reports for a run (`usage`, llama.cpp's `timings`), believed only
 * within bounds: a buggy server's negative, fractional or absurd figures, or more tokens cached than
 * in the prompt, must not reach the cache model's accuracy, the cost model or the metrics. A figure
 * out of bounds counts as not reported, and the caller falls back to what it knows itself.
 */
import type { StreamedCompletions } from "./completions.js";

/** More tokens than any context window holds: a count beyond is not believed. */
export const MAX_REPORTED_TOKENS = 10_000_000;
/** A day: a longer prefill or decode time is not believed. */
export const MAX_REPORTED_MS = 86_400_000;

export interface CheckedUsage {
  promptTokens?: number;
  completionTokens?: number;
  /** Of the prompt, the tokens the server reused from its cache (never more than the prompt). */
  cachedTokens?: number;
  prefillMs?: number;
  decodeMs?: number;
}

const count = (v: unknown): number | undefined =>
  typeof v === "number" && Number.isSafeInteger(v) && v >= 0 && v <= MAX_REPORTED_TOKENS ? v : undefined;
const ms = (v: unknown): number | undefined =>
  typeof v === "number" && Number.isFinite(v) && v >= 0 && v <= MAX_REPORTED_MS ? v : undefined;

/** The run's report, as far as it is believed. */
export function checkedUsage(s: Pick<StreamedCompletions, "usage" | "timings">): CheckedUsage {
  const promptTokens = count(s.usage?.prompt_tokens);
  let cachedTokens = count(s.usage?.prompt_tokens_details?.cached_tokens ?? s.timings?.cache_n);
  // Checked against the server's own prompt count (llama.cpp's: cached plus evaluated), not the
  // node's: a text prompt's tokens are the server's to count.
  const evaluated = count(s.timings?.prompt_n);
  const prompt =
    promptTokens ??
    (cachedTokens !== undefined && evaluated !== undefined ? cachedTokens + evaluated : undefined);
  if (cachedTokens !== undefined && prompt !== undefined && cachedTokens > prompt) cachedTokens = undefined;
  const out: CheckedUsage = {};
  if (promptTokens !== undefined) out.promptTokens = promptTokens;
  const completionTokens = count(s.usage?.completion_tokens);
  if (completionTokens !== undefined) out.completionTokens = completionTokens;
  if (cachedTokens !== undefined) out.cachedTokens = cachedTokens;
  const prefillMs = ms(s.timings?.prompt_ms);
  if (prefillMs !== undefined) out.prefillMs = prefillMs;
  const decodeMs = ms(s.timings?.predicted_ms);
  if (decodeMs !== undefined) out.decodeMs = decodeMs;
  return out;
}
