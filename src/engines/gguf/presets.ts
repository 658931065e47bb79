/** Parameters of the built-in model generator (kept apart so callers can validate without loading it). */
import { z } from "zod";

export const GeneratedModelSchema = z.object({
  embedding: z.number().int().min(32).max(4096).multipleOf(32),
  layers: z.number().int().min(1).max(64),
  heads: z.number().int().min(1).max(64),
  feedForward: z.number().int().min(32).max(16384).multipleOf(32),
  vocab: z.number().int().min(512).max(32000),
  contextLength: z.number().int().min(256).max(32768),
  seed: z.number().int().min(0).max(0xffffffff),
  /** q8_0 packs 32 weights into 34 bytes (what the benchmarks use); f32 is the simplest fallback. */
  weights: z.enum(["q8_0", "f32"]),
  /** Optional Jinja chat template stored as tokenizer.chat_template (tests the template path). */
  chatTemplate: z.string().max(65536).optional(),
});
export type GeneratedModelParams = z.infer<typeof GeneratedModelSchema>;

/** Named sizes: `tiny` loads in milliseconds (unit tests), `small` makes prefix reuse clearly measurable
 * in a quick test, `bench` is ~57M parameters, costing about what a small real model costs. */
export const MODEL_PRESETS = {
  tiny: {
    embedding: 64,
    layers: 2,
    heads: 4,
    feedForward: 128,
    vocab: 2048,
    contextLength: 4096,
    seed: 1,
    weights: "q8_0",
  },
  small: {
    embedding: 256,
    layers: 6,
    heads: 4,
    feedForward: 768,
    vocab: 4096,
    contextLength: 4096,
    seed: 1,
    weights: "q8_0",
  },
  bench: {
    embedding: 512,
    layers: 16,
    heads: 8,
    feedForward: 1536,
    vocab: 4096,
    contextLength: 4096,
    seed: 1,
    weights: "q8_0",
  },
} as const satisfies Record<string, GeneratedModelParams>;
export type ModelPreset = keyof typeof MODEL_PRESETS;

export function parameterCount(p: GeneratedModelParams): number {
  const perLayer = 4 * p.embedding * p.embedding + 3 * p.embedding * p.feedForward + 2 * p.embedding;
  return p.layers * perLayer + 2 * p.vocab * p.embedding + p.embedding;
}
