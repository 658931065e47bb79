/** Sampling penalties: OpenAI's presence and frequency penalties as node-llama-cpp's repeat penalty. */
import type { LlamaContextSequenceRepeatPenalty, Token } from "node-llama-cpp";
import type { EngineRequest } from "../../core/engine.js";

/**
 * OpenAI's penalties as node-llama-cpp's, on the last PENALTY_LAST_N tokens of prompt and output as
 * llama-server counts them, its multiplicative repeat penalty off (1): OpenAI has none.
 */
const PENALTY_LAST_N = 64;
export function repeatPenalty(
  req: EngineRequest,
  prompt: readonly Token[],
  generated: readonly Token[],
): { repeatPenalty?: LlamaContextSequenceRepeatPenalty } {
  if (!req.presencePenalty && !req.frequencyPenalty) return {};
  const recent = () => {
    const fromPrompt = PENALTY_LAST_N - generated.length;
    return fromPrompt > 0 ? [...prompt.slice(-fromPrompt), ...generated] : generated.slice(-PENALTY_LAST_N);
  };
  return {
    repeatPenalty: {
      punishTokens: recent,
      maxPunishTokens: PENALTY_LAST_N,
      penalty: 1,
      presencePenalty: req.presencePenalty ?? 0,
      frequencyPenalty: req.frequencyPenalty ?? 0,
    },
  };
}
