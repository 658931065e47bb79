/** Shared fixtures for engine tests: a per-run model cache and the shared-data paths. */
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

/** Generated models are cached across test files within a machine (keyed by parameters). */
export const TEST_MODEL_CACHE = process.env.PREFIXMESH_CACHE_DIR
  ? join(process.env.PREFIXMESH_CACHE_DIR, "models")
  : join(tmpdir(), "prefixmesh-test-models");

export const SHARED_MODELS = resolve(import.meta.dirname, "../../../shared/models");
export const STORIES_260K = join(SHARED_MODELS, "stories260K.gguf");
export const GPT2_VOCAB_ONLY = join(SHARED_MODELS, "vocab/ggml-vocab-gpt-2.gguf");

export function skipNote(path: string): boolean {
  const missing = !existsSync(path);
  if (missing) console.warn(`skipping: ${path} is absent (shared data not mounted)`);
  return missing;
}
