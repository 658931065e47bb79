/**
 * The remote engine's options, apart from the engine: the factory and the CLI validate specs with them
 * without loading the engine (and its local tokenizer tables) for nodes that run another engine.
 */
import { z } from "zod";
import { KvEventsOptionsSchema } from "../kv-events/options.js";
import { CACHE_MIRRORS, LlamaSlotsOptionsSchema } from "../llama-slots/options.js";

/**
 * The server's root URL, normalized once: OpenAI clients take a base URL ending in `/v1`, while
 * `/tokenize`, `/props` and `/health` live at the root, so a trailing `/v1` (and trailing slashes) is
 * dropped; any other path stays (a server behind a reverse-proxy prefix).
 */
export function normalizeBaseUrl(url: string): string {
  const u = new URL(url);
  u.pathname = u.pathname.replace(/\/+$/, "").replace(/\/v1$/i, "");
  return u.toString().replace(/\/+$/, "");
}

/** Most context tokens a server may report or a user configure (bounds a peer-controlled figure). */
export const MAX_CONTEXT_TOKENS = 10_000_000;

/** How prompts are tokenized: see `tokenizer` below. */
export const TOKENIZER_CHOICES = ["auto", "server", "local"] as const;

export const OpenAIEngineOptionsSchema = z.object({
  baseUrl: z
    .url({ protocol: /^https?$/ })
    .refine((u) => !u.includes("?") && !u.includes("#"), "must not have a query or fragment")
    .transform(normalizeBaseUrl),
  model: z.string().min(1),
  apiKey: z.string().optional(),
  /** Tokens the node's tree may hold for this server (LRU approximation of the remote cache). */
  capacityTokens: z.number().int().min(1).default(65536),
  /**
   * Prompt + output tokens per request when the server does not say (it is read from the server:
   * llama.cpp's `/props` n_ctx per slot, vLLM's and SGLang's `max_model_len` in `/v1/models`).
   */
  maxContextTokens: z.number().int().min(1).max(MAX_CONTEXT_TOKENS).default(4096),
  /** "auto": server /tokenize, else local; "server": server only; "local": gpt-tokenizer only. */
  tokenizer: z.enum(TOKENIZER_CHOICES).default("auto"),
  /** "auto": llama.cpp's /apply-template when present, else the fallback; "fallback": always the fallback. */
  chatTemplate: z.enum(["auto", "fallback"]).default("auto"),
  connectTimeoutMs: z.number().int().min(1).default(5_000),
  headersTimeoutMs: z.number().int().min(1).default(120_000),
  bodyTimeoutMs: z.number().int().min(1).default(120_000),
  retries: z.number().int().min(0).max(10).default(3),
  backoffMs: z.number().int().min(0).default(200),
  maxBackoffMs: z.number().int().min(0).default(10_000),
  /**
   * The server's KV-event stream (vLLM, SGLang): the node then mirrors its cache exactly
   * (engine-managed), and falls back to the LRU model of `capacityTokens` while the mirror is not exact.
   */
  kvEvents: KvEventsOptionsSchema.optional(),
  /**
   * How the server's cache is modelled without KV events: "llama-slots" mirrors a llama.cpp server's
   * slots exactly (the node chooses each request's slot), "lru" approximates any server by LRU, and
   * "auto" takes llama-slots when the server's `/props` names its slots, else LRU.
   */
  cacheMirror: z.enum(CACHE_MIRRORS).default("auto"),
  /** The llama.cpp server's cache flags, for the slot mirror (defaults: the server's). */
  llamaSlots: LlamaSlotsOptionsSchema.default(LlamaSlotsOptionsSchema.parse({})),
});
export type OpenAIEngineOptions = z.input<typeof OpenAIEngineOptionsSchema>;
