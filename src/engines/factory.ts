/**
 * `createEngine(spec)`: the one place the CLI / daemon turns `--engine llamacpp|openai|sim` into an
 * Engine. Specs are validated with zod; engines load lazily so `--engine sim` never loads llama.cpp.
 * A llamacpp model is a GGUF path, or `generated:<preset>` for the built-in generator (tiny, small,
 * bench), generated once into the cache directory.
 */
import { z } from "zod";
import type { Engine } from "../core/engine.js";
import { MODEL_PRESETS, type ModelPreset } from "./gguf/presets.js";
// Option schemas only: each engine (node-llama-cpp, the remote engine's tokenizer tables) loads when
// a spec asks for it.
import { type LlamaCppLog, LlamaCppOptionsSchema } from "./llamacpp/options.js";
import { OpenAIEngineOptionsSchema } from "./openai/options.js";
import { DEFAULT_PROFILE, isProfileName, resolveProfile } from "./sim/profiles.js";

const GENERATED = /^generated:(.+)$/;

export const EngineSpecSchema = z.discriminatedUnion("kind", [
  LlamaCppOptionsSchema.omit({ modelPath: true }).extend({
    kind: z.literal("llamacpp"),
    /** A GGUF path or `generated:<preset>`. */
    model: z.string().min(1),
    /** Where generated models are cached (default ~/.cache/prefixmesh/models or $PREFIXMESH_CACHE_DIR). */
    cacheDir: z.string().optional(),
  }),
  OpenAIEngineOptionsSchema.extend({ kind: z.literal("openai") }),
  z.object({
    kind: z.literal("sim"),
    profile: z
      .string()
      .default(DEFAULT_PROFILE)
      .refine(isProfileName, { error: (iss) => `unknown cost profile '${String(iss.input)}'` }),
    capacityTokens: z.number().int().min(1).optional(),
    timeScale: z.number().positive().max(1000).optional(),
    maxContextTokens: z.number().int().min(1).optional(),
  }),
]);
export type EngineSpec = z.input<typeof EngineSpecSchema>;

/** Resolves a llamacpp `model` value to a file path, generating the model if asked to. */
export async function resolveModelPath(model: string, cacheDir?: string): Promise<string> {
  const m = GENERATED.exec(model);
  if (!m) return model;
  const preset = m[1]!;
  if (!Object.hasOwn(MODEL_PRESETS, preset)) {
    throw new Error(`unknown generated model '${preset}' (known: ${Object.keys(MODEL_PRESETS).join(", ")})`);
  }
  const { ensureGeneratedModel } = await import("./gguf/generate.js");
  return ensureGeneratedModel(preset as ModelPreset, cacheDir);
}

/** Runtime hooks that are not part of the (serializable) spec. */
export interface EngineHooks {
  /**
   * Degraded-but-handled engine events (e.g. a saved state that failed to load, a KV-event mirror
   * degraded or exact again); default stderr.
   */
  log?: LlamaCppLog;
}

export async function createEngine(input: EngineSpec, hooks: EngineHooks = {}): Promise<Engine> {
  const spec = EngineSpecSchema.parse(input);
  switch (spec.kind) {
    case "llamacpp": {
      const { kind: _k, model, cacheDir, ...rest } = spec;
      const modelPath = await resolveModelPath(model, cacheDir);
      const { LlamaCppEngine } = await import("./llamacpp/engine.js");
      return LlamaCppEngine.create(
        { ...rest, modelPath, modelName: rest.modelName ?? modelLabel(model) },
        hooks,
      );
    }
    case "openai": {
      const { kind: _k, ...rest } = spec;
      const { OpenAIEngine } = await import("./openai/engine.js");
      return OpenAIEngine.create(rest, hooks.log ?? logToStderr);
    }
    case "sim": {
      const { SimEngine } = await import("./sim/sim-engine.js");
      return new SimEngine({
        profile: resolveProfile(spec.profile),
        capacityTokens: spec.capacityTokens,
        timeScale: spec.timeScale,
        maxContextTokens: spec.maxContextTokens,
      });
    }
  }
}

function logToStderr(msg: string, fields: Record<string, unknown>): void {
  console.warn(`prefixmesh openai: ${msg}`, JSON.stringify(fields));
}

function modelLabel(model: string): string | undefined {
  return GENERATED.test(model) ? model.replace(":", "-") : undefined;
}
