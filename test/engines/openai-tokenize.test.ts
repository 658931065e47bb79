/**
 * The remote engine's tokenization against a TEST DOUBLE of an OpenAI-compatible server
 * (openai-double.ts): which /tokenize shape it takes (vLLM's, llama.cpp's), and the local fallback.
 * The same engine against a real llama.cpp server: llama-server.test.ts.
 */
import { encode } from "gpt-tokenizer";
import { describe, expect, it } from "vitest";
import { EngineInputError } from "../../src/engines/errors.js";
import { OpenAIEngine } from "../../src/engines/openai/engine.js";
import { type Handler, json, opts, scriptedDouble } from "./openai-double.js";

const { live, startDouble } = scriptedDouble();

/**
 * llama.cpp's server's /tokenize as the real one answers: `{content}` → its tokens; a body without
 * `content` (vLLM's `{model, prompt}`) → 200 with no tokens, not an error.
 */
const llamaCppTokenize =
  (tokens: (text: string) => number[]): Handler =>
  (q, body, res) => {
    const b = JSON.parse(body) as { content?: unknown };
    json(200, { tokens: typeof b.content === "string" ? tokens(b.content) : [] })(q, body, res);
  };
/** A stand-in tokenizer for the double: one id per character, BOS (1) first. */
const charIds = (t: string) => [1, ...Array.from(t, (c) => c.charCodeAt(0))];

describe("remote engine: tokenization", () => {
  it("recognises llama.cpp's server, which answers vLLM's shape with 200 and no tokens", async () => {
    const { url, seen } = await startDouble({ "POST /tokenize": llamaCppTokenize(charIds) });
    live.engine = new OpenAIEngine(opts(url, { tokenizer: "server" }));
    expect(Array.from(await live.engine.tokenize("Once"))).toEqual(charIds("Once"));
    expect(Array.from(await live.engine.tokenize("upon"))).toEqual(charIds("upon"));
    const bodies = seen.map((x) => JSON.parse(x.body) as Record<string, unknown>);
    // vLLM's shape was tried once and came back empty; every later call uses llama.cpp's.
    expect(bodies.filter((b) => "prompt" in b)).toHaveLength(1);
    expect(bodies.at(-1)).toMatchObject({ content: "upon", add_special: true });
  });

  it("takes no shape whose probe comes back empty: such a server has no usable /tokenize", async () => {
    const { url } = await startDouble({ "POST /tokenize": json(200, { tokens: [] }) });
    live.engine = new OpenAIEngine(opts(url));
    expect(Array.from(await live.engine.tokenize("hello world"))).toEqual(encode("hello world"));
    const strict = new OpenAIEngine(opts(url, { tokenizer: "server" }));
    await expect(strict.tokenize("x")).rejects.toThrow(/no \/tokenize/);
    await strict.close();
  });

  it("uses the vLLM/SGLang /tokenize shape and remembers it", async () => {
    const { url, seen } = await startDouble({ "POST /tokenize": json(200, { tokens: [5, 6, 7], count: 3 }) });
    live.engine = new OpenAIEngine(opts(url, { apiKey: "sk-test" }));
    expect(Array.from(await live.engine.tokenize("hi"))).toEqual([5, 6, 7]);
    await live.engine.tokenize("again");
    // One probe finds the shape; then each text is tokenized once in it.
    const prompts = seen.map((s) => JSON.parse(s.body).prompt);
    expect(prompts.slice(1)).toEqual(["hi", "again"]);
    expect(prompts[0]).toMatch(/\S/);
    expect(seen[0]!.auth).toBe("Bearer sk-test");
  });

  it("falls back to the llama.cpp shape when the first is rejected", async () => {
    const handler: Handler = (_q, body, res) => {
      const b = JSON.parse(body);
      if (b.content === undefined) return json(400, { error: "content required" })(_q, body, res);
      json(200, { tokens: [9, 8] })(_q, body, res);
    };
    const { url } = await startDouble({ "POST /tokenize": handler });
    live.engine = new OpenAIEngine(opts(url));
    expect(Array.from(await live.engine.tokenize("x"))).toEqual([9, 8]);
  });

  it("surfaces the server's 4xx for one prompt as an input error once the shape is known", async () => {
    const handler: Handler = (q, body, res) => {
      const b = JSON.parse(body) as { prompt?: string };
      if ((b.prompt ?? "").length > 20) return json(400, { error: "prompt too long" })(q, body, res);
      json(200, { tokens: [3, 4] })(q, body, res);
    };
    const { url } = await startDouble({ "POST /tokenize": handler });
    live.engine = new OpenAIEngine(opts(url, { tokenizer: "server" }));
    expect(Array.from(await live.engine.tokenize("short"))).toEqual([3, 4]);
    const err = await live.engine.tokenize("x".repeat(50)).catch((e) => e);
    expect(err).toBeInstanceOf(EngineInputError);
    expect(String(err.message)).toMatch(/400.*prompt too long/);
  });

  it("uses the local tokenizer when the server has no /tokenize (auto), fails clearly when required", async () => {
    const { url } = await startDouble({});
    live.engine = new OpenAIEngine(opts(url));
    expect(Array.from(await live.engine.tokenize("hello world"))).toEqual(encode("hello world"));
    const strict = new OpenAIEngine(opts(url, { tokenizer: "server" }));
    await expect(strict.tokenize("x")).rejects.toThrow(/no \/tokenize/);
    await strict.close();
  });
});
