/** The simulated engine's cost model and its deterministic output. */
import type { Tokens } from "../../core/engine.js";
import type { CostProfile } from "./profiles.js";

export interface EngineCost {
  /** Time to first token: overhead + prefill (uncached and cached parts). */
  prefillMs: number;
  decodeMs: number;
}

export function engineCost(
  p: CostProfile,
  promptTokens: number,
  cachedTokens: number,
  outputTokens: number,
): EngineCost {
  const uncached = Math.max(0, promptTokens - cachedTokens);
  return {
    prefillMs: p.overheadMs + p.prefillMsPerToken * uncached + p.cachedMsPerToken * cachedTokens,
    decodeMs: p.decodeMsPerToken * outputTokens,
  };
}

const CHOICES = ["A", "B", "C", "D"] as const;

/**
 * The output is a function of the prompt only (FNV-1a over the tokens → one of A-D, then repeated
 * to length), so a run under faults can check every answer is the right one, whoever served it.
 */
export function simOutput(tokens: Tokens, outputTokens: number): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < tokens.length; i++) {
    h ^= tokens[i] as number;
    h = Math.imul(h, 0x01000193);
  }
  const first = CHOICES[(h >>> 0) % 4] as string;
  if (outputTokens <= 1) return outputTokens <= 0 ? "" : first;
  let s = first;
  for (let i = 1; i < outputTokens; i++) {
    h = Math.imul(h ^ i, 0x01000193);
    s += ` ${CHOICES[(h >>> 0) % 4]}`;
  }
  return s;
}
