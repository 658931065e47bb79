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
async function forward(node: NodeHandle, reqId: string, text: { prompt?: string; messages?: ChatMessage[] }) {
  const b64 = Buffer.from(new Uint32Array(4).fill(7).buffer).toString("base64");
  const request = {
    id: reqId,
    tokens: b64,
    ...text,
    maxTokens: 2,
    model: node.nodeConfig.models[0],
    tokenizer: "other-model",
  };
  const res = await fetch(`${node.peerUrl}/peer/forward`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-prefixmesh-sender": "B" },
    body: JSON.stringify({ reqId, attempt: 0, hops: 1, request }),
    // Far below the stream's TTL: unbounded, the step would hold the stream until then.
    signal: AbortSignal.timeout(10_000),
  });
  expect(res.status).toBe(200);
  const lines = (await res.text()).trim().split("\n");
  return (JSON.parse(lines.at(-1) as string) as { msg: { type: string; error?: string; fault?: string } })
    .msg;
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
