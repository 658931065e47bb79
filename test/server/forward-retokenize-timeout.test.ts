/**
 * A forward in another model's tokens (mixed meshes) is tokenized again at the serving node; when its
 * engine's chat template or `/tokenize` never answers, `--tokenize-timeout-ms` bounds the step as it
 * does a client's: the origin gets the forward's error at once, with fault `engine` (a hang is the
 * engine's, not the prompt's), so it falls back now rather than after its forward timeout, and the
 * forward's open stream here is freed. The engine is a TEST DOUBLE: the simulator's, whose steps never
 * settle when the text says so.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChatMessage, Tokens } from "../../src/core/engine.js";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { postForeignForward } from "./forward-post.js";
import { openForwards, pair, TestSimEngine } from "./helpers.js";

/** Test double: the simulator's engine, whose tokenize or chat template never answers on "hang". */
class NeverAnsweringDouble extends TestSimEngine {
  override async tokenize(text: string): Promise<Tokens> {
    if (text.startsWith("hang")) return new Promise<Tokens>(() => {});
    return super.tokenize(text);
  }
  override async applyChatTemplate(messages: ChatMessage[]): Promise<string> {
    if (messages.some((m) => m.content === "hang")) return new Promise<string>(() => {});
    return super.applyChatTemplate(messages);
  }
}

/** Forwards in another model's tokens to `node` as member B; its final record's msg. */
function forward(node: NodeHandle, reqId: string, text: { prompt?: string; messages?: ChatMessage[] }) {
  return postForeignForward(node, reqId, text, 10_000);
}

describe("a forward its engine never tokenizes", () => {
  let a: NodeHandle;
  let b: NodeHandle;
  beforeAll(async () => {
    const settings = { simTimeScale: "0.001", mixedModels: true, tokenizeTimeoutMs: "300" };
    [a, b] = await pair(settings, { A: new NeverAnsweringDouble() });
  });
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
  });

  it.each([
    ["tokenize", { prompt: "hang here" }],
    ["chat template", { messages: [{ role: "user" as const, content: "hang" }] }],
  ])("%s: answered at once with fault engine, its stream freed", async (step, text) => {
    const msg = await forward(a, `hang-${step}`, text);
    expect(msg.type).toBe("error");
    expect(msg.fault).toBe("engine");
    expect(msg.error).toMatch(/^cannot tokenize a forward: /);
    expect(msg.error).toContain(`${step} gave no answer within 300 ms (--tokenize-timeout-ms)`);
    expect(openForwards(a)).toBe(0);
  });

  it("still serves a forward its engine answers", async () => {
    const msg = await forward(a, "answered", { prompt: "a question" });
    expect(msg.type).toBe("result");
  });
});
