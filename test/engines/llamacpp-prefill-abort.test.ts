/**
 * A long prefill on the in-process llama.cpp engine stops at the next context batch once its run is
 * aborted (llama.cpp checks no signal inside one), and what it evaluated stays cached.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EngineAbortedError } from "../../src/engines/errors.js";
import { ensureGeneratedModel } from "../../src/engines/gguf/generate.js";
import { LlamaCppEngine } from "../../src/engines/llamacpp/engine.js";
import { TEST_MODEL_CACHE } from "./helpers.js";

const BATCH = 8;

/** A test double of a signal that reads as aborted from its `after + 1`-th look on. */
function abortedAfterLooks(after: number): AbortSignal {
  let looks = 0;
  return {
    get aborted() {
      return ++looks > after;
    },
  } as AbortSignal;
}

describe("llama.cpp engine: an aborted long prefill", () => {
  let engine: LlamaCppEngine;
  beforeAll(async () => {
    engine = await LlamaCppEngine.create({
      modelPath: ensureGeneratedModel("tiny", TEST_MODEL_CACHE),
      slots: 1,
      slotContext: 512,
      batchSize: BATCH,
    });
  });
  afterAll(() => engine?.close());

  it("stops between context batches, and keeps the batches it evaluated cached", async () => {
    const tokens = Uint32Array.from({ length: 10 * BATCH + 3 }, (_, i) => (i === 0 ? 1 : 5 + (i % 50)));
    // Looks: one as the run starts, one before the first batch; from the third on, aborted.
    const signal = abortedAfterLooks(2);
    await expect(engine.run({ id: "cut", tokens, maxTokens: 4 }, undefined, signal)).rejects.toThrow(
      EngineAbortedError,
    );
    const again = await engine.run({ id: "again", tokens, maxTokens: 4 });
    expect(again.cachedTokens).toBe(BATCH);
    expect(again.promptTokens).toBe(tokens.length);
    // Nothing was lost either: a third run finds the whole prompt.
    expect((await engine.run({ id: "third", tokens, maxTokens: 4 })).cachedTokens).toBe(tokens.length - 1);
  });
});
