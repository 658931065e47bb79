/**
 * The embedded engine's options, apart from the engine: the factory and the CLI validate specs with
 * them without loading node-llama-cpp for nodes that run another engine.
 */
import { z } from "zod";

export const LlamaCppOptionsSchema = z.object({
  modelPath: z.string().min(1),
  /** Model identity advertised to peers; defaults to the file name. */
  modelName: z.string().min(1).optional(),
  slots: z.number().int().min(1).max(64).default(4),
  /** Tokens per slot (prompt + output). */
  slotContext: z.number().int().min(64).max(131072).default(2048),
  /** CPU threads for this engine: 1 holds up best when several nodes share a machine. */
  threads: z.number().int().min(1).max(256).default(1),
  batchSize: z.number().int().min(1).max(8192).default(512),
  flashAttention: z.boolean().default(false),
  /** Where saved states go; a private subdirectory is created (tmpfs /dev/shm when present). */
  stateDir: z.string().optional(),
  maxSavedStates: z.number().int().min(0).max(10000).default(32),
  maxSavedBytes: z
    .number()
    .int()
    .min(0)
    .default(256 * 1024 * 1024),
  /** Take the longest-prefix slot only if it shares at least this fraction of the prompt (else LRU). */
  slotReuseFraction: z.number().min(0).max(1).default(0.5),
  /** Spill a slot to a saved state only when at least this many of its tokens would be lost. */
  minSpillTokens: z.number().int().min(1).default(32),
});
export type LlamaCppOptions = z.input<typeof LlamaCppOptionsSchema>;

/**
 * Where the engine reports degraded-but-handled events (a saved state that failed to save or load).
 * The daemon passes its logger; the default writes one line to stderr.
 */
export type LlamaCppLog = (msg: string, fields: Record<string, unknown>) => void;
