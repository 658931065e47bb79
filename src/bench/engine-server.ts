/**
 * The "engine direct" baseline of the router-overhead benchmark: the simulated engine behind a bare
 * HTTP endpoint (tokenize + run + JSON), i.e. what a client pays without any prefixmesh node in the way.
 * Prints its URL on stdout, runs until killed.
 */
import Fastify from "fastify";
import { DEFAULT_PROFILE, resolveProfile } from "../engines/sim/profiles.js";
import { SimEngine } from "../engines/sim/sim-engine.js";

const engine = new SimEngine({ profile: resolveProfile(DEFAULT_PROFILE), timeScale: 0 });
const app = Fastify({ logger: false });
app.post("/v1/completions", async (req) => {
  const body = req.body as { prompt: string; max_tokens?: number };
  const tokens = await engine.tokenize(body.prompt);
  const r = await engine.run({ id: "x", tokens, prompt: body.prompt, maxTokens: body.max_tokens ?? 1 });
  return {
    object: "text_completion",
    choices: [{ index: 0, text: r.text, finish_reason: r.finishReason }],
    usage: {
      prompt_tokens: r.promptTokens,
      completion_tokens: r.completionTokens,
      prompt_tokens_details: { cached_tokens: r.cachedTokens },
    },
  };
});
const url = await app.listen({ host: "127.0.0.1", port: 0 });
process.stdout.write(`${url}\n`);
