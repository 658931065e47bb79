/**
 * Named cost profiles for the simulated engine (an SGLang-like, batching-free worker):
 *   engine time = overheadMs + prefillMsPerToken × uncached + cachedMsPerToken × cached
 *                 + decodeMsPerToken × output tokens.
 * Where each profile comes from: ARCHITECTURE.md and BENCHMARKS.md ("Simulator: cost profile fit").
 */

export interface CostProfile {
  name: string;
  /** Per request: HTTP/scheduling/tokenisation overhead of the serving stack. */
  overheadMs: number;
  /** Prefill per prompt token NOT found in the cache. */
  prefillMsPerToken: number;
  /** Per prompt token reused from the cache (attention still reads it). */
  cachedMsPerToken: number;
  /** Per generated token. */
  decodeMsPerToken: number;
  /** Default KV capacity per node in tokens. */
  capacityTokens: number;
  /** Where the numbers come from. */
  source: string;
}

/**
 * Fitted to the paper's own measurements (Tables 1-2: Qwen2.5-0.5B on 10% of an H100 under SGLang,
 * MMLU 5-shot, 1 output token): a least-squares line through (uncached tokens, latency) of its four
 * Δcomm = 2 ms points, its slope rescaled from the paper's token counts to our cl100k ones; the
 * overhead is then set so that our no-routing MMLU run lands on the paper's no-route latency. The
 * decode / cached-token split cannot be identified from 1-token outputs: those two are assumptions.
 * Capacity: 10% of 80 GB minus weights and activations, at 12 KiB of KV per token (24 layers × 2 × 2
 * KV heads × 64 × bf16). The inputs and the fit: BENCHMARKS.md, "Simulator: cost profile fit".
 */
export const PAPER_H100_QWEN05B: CostProfile = {
  name: "paper-h100-qwen0.5b",
  overheadMs: 99,
  prefillMsPerToken: 2.03,
  cachedMsPerToken: 0.01,
  decodeMsPerToken: 5,
  capacityTokens: 530_000,
  source: "fit to the paper's Tables 1-2 (see ARCHITECTURE.md, 'Simulator: cost profile fit')",
};

/**
 * Measured, not fitted: the embedded llama.cpp engine (src/engines/llamacpp) on the generated `bench`
 * model (~57M params, q8_0), 1 thread, on this project's 2-core machine with co-located nodes
 * (BENCHMARKS.md, "Engines": overhead from a 2-token prompt, prefill from a cold 540-token prompt,
 * cached cost from the 450-cached run, decode per output token). Capacity = the engine's default
 * (4 slots + 32 saved states) × 2048-token context.
 */
export const CPU_LLAMACPP: CostProfile = {
  name: "cpu-llamacpp",
  overheadMs: 15,
  prefillMsPerToken: 6.7,
  cachedMsPerToken: 0.35,
  decodeMsPerToken: 12,
  capacityTokens: 73_728,
  source: "measured with npm run bench:engines (BENCHMARKS.md, 'Engines')",
};

export const PROFILES = {
  "paper-h100-qwen0.5b": PAPER_H100_QWEN05B,
  "cpu-llamacpp": CPU_LLAMACPP,
} as const satisfies Record<string, CostProfile>;

export type ProfileName = keyof typeof PROFILES;
/** The profile fitted to the paper's own measurements: what the simulator uses unless told otherwise. */
export const DEFAULT_PROFILE: ProfileName = "paper-h100-qwen0.5b";
export const PROFILE_NAMES = Object.keys(PROFILES) as ProfileName[];

export function isProfileName(s: string): s is ProfileName {
  return Object.hasOwn(PROFILES, s);
}

export function resolveProfile(p: ProfileName | CostProfile): CostProfile {
  if (typeof p !== "string") return p;
  const found = PROFILES[p];
  if (!found) throw new Error(`unknown cost profile '${p}' (known: ${PROFILE_NAMES.join(", ")})`);
  return found;
}
