/**
 * What the node must know of a llama.cpp server's cache flags to mirror it (the server does not
 * report them): its defaults here are the server's own, so a server started without these flags needs
 * no option at all.
 */
import { z } from "zod";

export const LlamaSlotsOptionsSchema = z.object({
  /** `--slot-prompt-similarity`. */
  similarity: z.number().min(0).max(1).default(0.1),
  /** `--cache-ram` in MiB (0: off, -1: no limit). */
  cacheRamMiB: z
    .number()
    .int()
    .min(-1)
    .max(1 << 30)
    .default(8192),
  /** `--cache-idle-slots` / `--no-cache-idle-slots`. */
  cacheIdleSlots: z.boolean().default(true),
  /** `--kv-unified`. */
  kvUnified: z.boolean().default(false),
  /** KV bytes per token of the model (for the RAM cache's byte limit; unknown: the limit is not modelled). */
  bytesPerToken: z
    .number()
    .positive()
    .max(1 << 30)
    .optional(),
  /**
   * Slot states the node saves to the server's `--slot-save-path` and restores into a slot when they
   * hold more of a prompt than the server would find (0: none; the server must run with the flag).
   */
  savedSlots: z.number().int().min(0).max(10_000).default(0),
});
export type LlamaSlotsOptions = z.input<typeof LlamaSlotsOptionsSchema>;
export type LlamaSlotsConfig = z.output<typeof LlamaSlotsOptionsSchema>;

/** How the remote engine models the server's cache. */
export const CACHE_MIRRORS = ["auto", "lru", "llama-slots"] as const;
export type CacheMirrorChoice = (typeof CACHE_MIRRORS)[number];
