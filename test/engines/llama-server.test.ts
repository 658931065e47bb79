/**
 * The remote engine against the REAL llama.cpp server (llama-server built from node-llama-cpp's
 * bundled llama.cpp, stories260K on 127.0.0.1): tokenization, the context limit, completions,
 * streaming, chat and reported cached tokens; then a prefixmesh node fronting it, driven by the
 * official `openai` client. No test double anywhere here.
 */
import OpenAI from "openai";
import pino from "pino";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { EngineInputError } from "../../src/engines/errors.js";
import { createEngine } from "../../src/engines/factory.js";
import type { OpenAIEngine } from "../../src/engines/openai/engine.js";
import { type NodeHandle, startNode } from "../../src/server/runtime/start-node.js";
import { loopbackNodeSettings } from "../server/helpers.js";
import {
  type LlamaServer,
  llamaServerSkip,
  MODEL,
  MUST_RUN_IN_CI,
  startLlamaServer,
} from "./llama-server.js";

const skip = llamaServerSkip() !== undefined;
const PROMPT = "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun.";

async function getJson<T>(url: string, init?: RequestInit): Promise<T> {
  const res = await fetch(url, init);
  expect(res.status).toBe(200);
  return (await res.json()) as T;
}

describe.runIf(MUST_RUN_IN_CI)("the real llama-server in CI", () => {
  it("is built before the tests (.ci/run runs npm run engines:llama-server)", () => {
    expect.fail("llama-server is not built, so CI would not exercise the real server");
  });
});

describe.skipIf(skip)("remote engine against the real llama.cpp server", () => {
  let server: LlamaServer;
  const engines: OpenAIEngine[] = [];
  beforeAll(async () => {
    server = await startLlamaServer({ slots: 2, contextTokens: 1024 });
  });
  afterEach(async () => {
    await Promise.all(engines.splice(0).map((e) => e.close()));
  });
  afterAll(async () => {
    await server?.stop();
  });
  const engine = async (baseUrl: string, extra: object = {}) => {
    const e = (await createEngine({
      kind: "openai",
      baseUrl,
      model: MODEL,
      retries: 1,
      ...extra,
    })) as OpenAIEngine;
    engines.push(e);
    return e;
  };

  it("tokenizes with the server's own /tokenize (llama.cpp's shape): the tokens it evaluates", async () => {
    const e = await engine(server.url, { tokenizer: "server" });
    const tokens = await e.tokenize(PROMPT);
    const direct = await getJson<{ tokens: number[] }>(`${server.url}/tokenize`, {
      method: "POST",
      body: JSON.stringify({ content: PROMPT, add_special: true }),
    });
    expect(direct.tokens.length).toBeGreaterThan(0);
    expect(Array.from(tokens)).toEqual(direct.tokens);
    const r = await e.run({ id: "t", tokens, prompt: PROMPT, maxTokens: 2 });
    expect(r.promptTokens).toBe(tokens.length);
  });

  it("takes --engine-url ending in /v1, and reads the context per slot from the server", async () => {
    const e = await engine(`${server.url}/v1`);
    expect(await e.health()).toEqual({ ok: true });
    const slots = await getJson<{ n_ctx: number }[]>(`${server.url}/slots`);
    expect(slots.length).toBe(2);
    expect(e.contextSource).toBe("server");
    expect(e.info.maxContextTokens).toBe(slots[0]!.n_ctx);
    expect(e.info.maxContextTokens).not.toBe(4096);
    const tokens = await e.tokenize(PROMPT);
    const r = await e.run({ id: "u", tokens, prompt: PROMPT, maxTokens: 3 });
    expect(r.completionTokens).toBeGreaterThan(0);
    // Beyond the server's context: refused before it reaches the server, with the server's figure.
    const over = e.info.maxContextTokens - tokens.length + 1;
    const err = await e.run({ id: "v", tokens, prompt: PROMPT, maxTokens: over }).catch((x) => x);
    expect(err).toBeInstanceOf(EngineInputError);
    expect(String(err.message)).toContain(`context of ${slots[0]!.n_ctx} tokens`);
  });

  it("streams a completion, and reports the cached prefix when the prompt repeats", async () => {
    const e = await engine(server.url);
    const prompt = `${PROMPT} One day, she went to the park with her mom.`;
    const tokens = await e.tokenize(prompt);
    const chunks: string[] = [];
    const first = await e.run({ id: "s1", tokens, prompt, maxTokens: 8 }, (c) => chunks.push(c.text));
    expect(chunks.length).toBeGreaterThan(1);
    expect(chunks.join("")).toBe(first.text);
    expect(first.finishReason).toBe("length");
    expect(first.completionTokens).toBe(8);
    expect(first.cacheReported).toBe(true);
    const again = await e.run({ id: "s2", tokens, prompt, maxTokens: 8 });
    expect(again.text).toBe(first.text); // greedy by default: the same answer
    expect(again.cacheReported).toBe(true);
    // The server re-evaluates at most the last prompt token to get its logits.
    expect(again.cachedTokens).toBeGreaterThanOrEqual(tokens.length - 1);
    expect(again.cachedTokens).toBeLessThanOrEqual(tokens.length);
  });

  it("renders chat with the server's own template (/apply-template) and runs it", async () => {
    const e = await engine(server.url);
    const messages = [{ role: "user" as const, content: "Tell me a story about a cat." }];
    const rendered = await e.applyChatTemplate(messages);
    const direct = await getJson<{ prompt: string }>(`${server.url}/apply-template`, {
      method: "POST",
      body: JSON.stringify({ messages }),
    });
    expect(rendered).toBe(direct.prompt);
    expect(rendered).toContain("Tell me a story about a cat.");
    const r = await e.run({ id: "c", tokens: await e.tokenize(rendered), prompt: rendered, maxTokens: 4 });
    expect(r.completionTokens).toBeGreaterThan(0);
  });
});

describe.skipIf(skip)("a prefixmesh node fronting the real llama.cpp server (openai client)", () => {
  let server: LlamaServer;
  let node: NodeHandle;
  let client: OpenAI;
  beforeAll(async () => {
    server = await startLlamaServer({ slots: 2 });
    const settings = await loopbackNodeSettings({
      engine: "openai",
      engineUrl: `${server.url}/v1`,
      engineTokenizer: "server",
      model: MODEL,
      // The test counts the engine's predictions of its own four requests: no calibration runs.
      calibrationMs: "0",
    });
    node = await startNode(settings, { logger: pino({ level: "silent" }) });
    client = new OpenAI({ baseURL: `${node.apiUrl}/v1`, apiKey: "unused", maxRetries: 0, timeout: 60_000 });
  });
  afterAll(async () => {
    await node?.stop();
    await server?.stop();
  });

  it("answers completions, streams, and chat, and reports the server's cached tokens", async () => {
    expect((await client.models.list()).data.map((m) => m.id)).toEqual([MODEL]);
    const prompt = `${PROMPT} Her favorite toy was a red ball.`;
    const first = await client.completions.create({ model: MODEL, prompt, max_tokens: 4 });
    expect(first.choices[0]?.text.length).toBeGreaterThan(0);
    const prompted = first.usage?.prompt_tokens ?? 0;
    expect(prompted).toBeGreaterThan(10);

    const stream = await client.completions.create({ model: MODEL, prompt, max_tokens: 4, stream: true });
    let text = "";
    for await (const c of stream) text += c.choices[0]?.text ?? "";
    expect(text).toBe(first.choices[0]?.text);

    const repeat = await client.completions.create({ model: MODEL, prompt, max_tokens: 4 });
    expect(repeat.usage?.prompt_tokens_details?.cached_tokens).toBeGreaterThanOrEqual(prompted - 1);

    const chat = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "Tell me a story." }],
      max_tokens: 4,
    });
    expect(chat.choices[0]?.message.content?.length).toBeGreaterThan(0);
    expect(chat.usage?.completion_tokens).toBe(4);

    // The node mirrors the server's slots (auto) and shows how its predictions held, per run.
    const cluster = await getJson<{
      engineCache: { mode: string; accuracy: { requests: number; exact: number } };
    }>(`${node.apiUrl}/cluster`);
    expect(cluster.engineCache.mode).toBe("llama-slots");
    expect(cluster.engineCache.accuracy.requests).toBe(4);
    expect(cluster.engineCache.accuracy.exact).toBe(4);
    const metrics = await (await fetch(`${node.apiUrl}/metrics`)).text();
    expect(metrics).toMatch(
      /prefixmesh_engine_cache_predictions_total\{outcome="exact",source="llama-slots",node="A"\} 4/,
    );
  });

  it("refuses a prompt beyond the server's context, naming the server's figure (not a fixed 4096)", async () => {
    const slots = await getJson<{ n_ctx: number }[]>(`${server.url}/slots`);
    const long = "The cat sat on the mat. ".repeat(2000);
    const err = await client.completions
      .create({ model: MODEL, prompt: long, max_tokens: 1 })
      .catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(String(err.message)).toContain(`context is ${slots[0]!.n_ctx}`);
  });
});
