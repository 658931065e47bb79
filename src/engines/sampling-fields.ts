/**
 * A request's sampling fields as the wire carries them: OpenAI-compatible `/v1/completions` and
 * llama-server's native `/completion` take these under the same names, so both engines send this one
 * spelling. The output limit is not among them: its name differs (`max_tokens`, `n_predict`), so each
 * engine's body spells it beside these.
 */
import type { EngineRequest } from "../core/engine.js";

/** Any may be absent: the server then takes its own default. */
export interface SamplingFields {
  temperature?: number;
  top_p?: number;
  seed?: number;
  presence_penalty?: number;
  frequency_penalty?: number;
  stop?: string[];
}

/** The fields of `req`; greedy (temperature 0) unless it says otherwise, and none of those it leaves unset. */
export function samplingFields(req: EngineRequest): SamplingFields {
  return {
    // The servers' own default temperature is not greedy: a run must not sample unless asked to.
    temperature: req.temperature ?? 0,
    ...(req.topP !== undefined ? { top_p: req.topP } : {}),
    ...(req.seed !== undefined ? { seed: req.seed } : {}),
    ...(req.presencePenalty !== undefined ? { presence_penalty: req.presencePenalty } : {}),
    ...(req.frequencyPenalty !== undefined ? { frequency_penalty: req.frequencyPenalty } : {}),
    ...(req.stop && req.stop.length > 0 ? { stop: req.stop } : {}),
  };
}
