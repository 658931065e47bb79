/**
 * The remote engine against a real prefixmesh node (which speaks the OpenAI API) running the embedded
 * llama.cpp engine on the tiny generated model: end to end, no fakes.
 */
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureGeneratedModel } from "../../src/engines/gguf/generate.js";
import { LlamaCppEngine } from "../../src/engines/llamacpp/engine.js";
import { OpenAIEngine } from "../../src/engines/openai/engine.js";
import { type NodeHandle, startNode } from "../../src/server/runtime/start-node.js";
import { loopbackNodeSettings } from "../server/helpers.js";
import { TEST_MODEL_CACHE } from "./helpers.js";

describe("remote engine against a prefixmesh node (embedded llama.cpp)", () => {
  let node: NodeHandle;
  let local: LlamaCppEngine;
  let remote: OpenAIEngine;

  beforeAll(async () => {
    local = await LlamaCppEngine.create({
      modelPath: ensureGeneratedModel("tiny", TEST_MODEL_CACHE),
      slots: 2,
    });
    const settings = await loopbackNodeSettings();
    node = await startNode(settings, { logger: pino({ level: "silent" }), engine: local });
    remote = new OpenAIEngine({ baseUrl: node.apiUrl, model: local.info.model, retries: 0 });
  });
  afterAll(async () => {
    await remote?.close();
    await node?.stop();
    await local?.close();
  });

  it("answers a streamed completion identical to the embedded engine's, and reports the cached prefix", async () => {
    expect((await remote.health()).ok).toBe(true);
    const prompt = "The history of the Roman Empire spans many centuries and ".repeat(6);
    const tokens = await remote.tokenize(prompt);
    const chunks: string[] = [];
    const first = await remote.run({ id: "1", tokens, prompt, maxTokens: 6 }, (c) => chunks.push(c.text));
    expect(first.completionTokens).toBeGreaterThan(0);
    expect(chunks.join("")).toBe(first.text);
    const direct = await local.run({ id: "d", tokens: await local.tokenize(prompt), maxTokens: 6 });
    expect(first.text).toBe(direct.text); // greedy: same model, same tokens → same output
    const second = await remote.run({ id: "2", tokens, prompt: `${prompt}again`, maxTokens: 2 });
    // the node reports usage.prompt_tokens_details.cached_tokens: the whole first prompt was reused
    expect(second.cacheReported).toBe(true);
    expect(second.cachedTokens).toBeGreaterThanOrEqual((await local.tokenize(prompt)).length - 1);
  });
});
