/**
 * Protocol-edge tests for the remote engine against a TEST DOUBLE of an OpenAI-compatible server
 * scripted inside the test (127.0.0.1 only). The double replays canned responses, shaped as the real
 * servers answer (llama.cpp's server, vLLM); it does no inference. The same engine against a real
 * llama.cpp server: llama-server.test.ts.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { encode } from "gpt-tokenizer";
import { afterEach, describe, expect, it } from "vitest";
import { EngineInputError, EngineUnavailableError } from "../../src/engines/errors.js";
import { retryAfterMs } from "../../src/engines/http-client.js";
import { OpenAIEngine } from "../../src/engines/openai/engine.js";
import {
  normalizeBaseUrl,
  type OpenAIEngineOptions,
  OpenAIEngineOptionsSchema,
} from "../../src/engines/openai/options.js";
import { MAX_SSE_EVENT_BYTES, sseData } from "../../src/engines/sse.js";
import { loadEngine } from "../../src/server/runtime/engine-loader.js";
import { envName, resolveNodeSettings } from "../../src/server/settings/index.js";
import { closedAfterEach } from "./server-double.js";

type Handler = (req: IncomingMessage, body: string, res: ServerResponse) => void;
interface Seen {
  method: string;
  url: string;
  body: string;
  auth?: string;
}

const live = closedAfterEach<OpenAIEngine>();

/** Starts the test double; `routes` maps "METHOD /path" to a handler or a queue of handlers. */
async function startDouble(
  routes: Record<string, Handler | Handler[]>,
): Promise<{ url: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  live.double = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      seen.push({ method: req.method!, url: req.url!, body, auth: req.headers.authorization });
      const r = routes[`${req.method} ${req.url}`];
      const h = Array.isArray(r) ? (r.length > 1 ? r.shift() : r[0]) : r;
      if (!h) {
        res.writeHead(404, { "content-type": "application/json" }).end('{"error":"not found"}');
        return;
      }
      h(req, body, res);
    });
  });
  await new Promise<void>((r) => live.double!.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(live.double!.address() as AddressInfo).port}`, seen };
}

const json =
  (status: number, obj: unknown, headers: Record<string, string> = {}): Handler =>
  (_q, _b, res) =>
    res.writeHead(status, { "content-type": "application/json", ...headers }).end(JSON.stringify(obj));

const sse =
  (events: unknown[]): Handler =>
  (_q, _b, res) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    for (const e of events) res.write(`data: ${typeof e === "string" ? e : JSON.stringify(e)}\n\n`);
    res.end("data: [DONE]\n\n");
  };

const opts = (url: string, extra: Partial<OpenAIEngineOptions> = {}): OpenAIEngineOptions => ({
  baseUrl: url,
  model: "m",
  backoffMs: 5,
  maxBackoffMs: 2000,
  ...extra,
});

const tokenReq = (prompt: string, maxTokens = 4) => ({
  id: "r",
  tokens: Uint32Array.from([1, 2, 3]),
  prompt,
  maxTokens,
});

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

describe("remote engine: completions", () => {
  it("streams text, reports usage and cached tokens, and sends greedy sampling by default", async () => {
    const { url, seen } = await startDouble({
      "POST /v1/completions": sse([
        { choices: [{ text: "Hel", finish_reason: null }] },
        { choices: [{ text: "lo", finish_reason: "length" }] },
        {
          choices: [],
          usage: { prompt_tokens: 540, completion_tokens: 2, prompt_tokens_details: { cached_tokens: 448 } },
        },
      ]),
    });
    live.engine = new OpenAIEngine(opts(url));
    const chunks: string[] = [];
    const r = await live.engine.run(tokenReq("prompt text", 2), (c) => chunks.push(c.text));
    expect(r).toMatchObject({ text: "Hello", completionTokens: 2, promptTokens: 540, cachedTokens: 448 });
    expect(r.cacheReported).toBe(true);
    expect(r.finishReason).toBe("length");
    expect(chunks).toEqual(["Hel", "lo"]);
    const sent = JSON.parse(seen[0]!.body);
    expect(sent).toMatchObject({
      model: "m",
      prompt: "prompt text",
      max_tokens: 2,
      temperature: 0,
      stream: true,
    });
    expect(live.engine.info.cacheMode).toBe("node-managed");
  });

  it("sends presence_penalty and frequency_penalty as OpenAI names them, and none when unset", async () => {
    const answer = () =>
      sse([
        { choices: [{ text: "A", finish_reason: "stop" }] },
        { choices: [], usage: { prompt_tokens: 3, completion_tokens: 1 } },
      ]);
    const { url, seen } = await startDouble({ "POST /v1/completions": [answer(), answer()] });
    live.engine = new OpenAIEngine(opts(url));
    await live.engine.run({ ...tokenReq("p", 1), presencePenalty: 0.5, frequencyPenalty: -1 });
    await live.engine.run(tokenReq("p", 1));
    expect(JSON.parse(seen[0]!.body)).toMatchObject({ presence_penalty: 0.5, frequency_penalty: -1 });
    const plain = JSON.parse(seen[1]!.body);
    expect(plain.presence_penalty).toBeUndefined();
    expect(plain.frequency_penalty).toBeUndefined();
  });

  it("predicts each run's cached tokens with its LRU model and counts them against the report", async () => {
    const usage = (cached: number) =>
      sse([
        { choices: [{ text: "A", finish_reason: "stop" }] },
        {
          choices: [],
          usage: { prompt_tokens: 3, completion_tokens: 1, prompt_tokens_details: { cached_tokens: cached } },
        },
      ]);
    const { url } = await startDouble({ "POST /v1/completions": [usage(0), usage(2), usage(3)] });
    live.engine = new OpenAIEngine(opts(url));
    const first = await live.engine.run(tokenReq("p"));
    expect(first.cachePrediction).toEqual({ source: "lru", predicted: 0, reported: 0 });
    // The prompt is now in the model: it predicts all 3 tokens; this server reports 2 (llama.cpp's rule).
    expect((await live.engine.run(tokenReq("p"))).cachePrediction).toMatchObject({
      predicted: 3,
      reported: 2,
    });
    await live.engine.run(tokenReq("p"));
    expect(live.engine.cacheStatus()).toMatchObject({
      mode: "lru",
      accuracy: { source: "lru", requests: 3, exact: 2, absErrorTokens: 1 },
    });
  });

  it("reads llama.cpp server timings (cache_n, prompt_ms, predicted_ms)", async () => {
    const { url } = await startDouble({
      "POST /v1/completions": sse([
        {
          choices: [{ text: "A", finish_reason: "stop" }],
          timings: { cache_n: 450, prompt_n: 90, prompt_ms: 70.5, predicted_ms: 3 },
        },
      ]),
    });
    live.engine = new OpenAIEngine(opts(url));
    const r = await live.engine.run(tokenReq("p"));
    expect(r).toMatchObject({
      cachedTokens: 450,
      cacheReported: true,
      prefillMs: 70.5,
      decodeMs: 3,
      finishReason: "stop",
    });
  });

  it("marks cached tokens as unreported when the server says nothing", async () => {
    const { url } = await startDouble({
      "POST /v1/completions": sse([{ choices: [{ text: "x", finish_reason: "stop" }] }]),
    });
    live.engine = new OpenAIEngine(opts(url));
    const r = await live.engine.run(tokenReq("p"));
    expect(r.cacheReported).toBe(false);
    expect(r.cachedTokens).toBe(0);
    expect(r.completionTokens).toBe(1);
  });

  it("retries 503 and 429 (honouring Retry-After), then succeeds", async () => {
    const ok = sse([{ choices: [{ text: "ok", finish_reason: "stop" }] }]);
    const { url, seen } = await startDouble({
      "POST /v1/completions": [
        json(503, { error: "busy" }),
        json(429, { error: "slow down" }, { "retry-after": "1" }),
        ok,
      ],
    });
    live.engine = new OpenAIEngine(opts(url));
    const t0 = Date.now();
    const r = await live.engine.run(tokenReq("p"));
    expect(r.text).toBe("ok");
    expect(seen.length).toBe(3);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(900); // waited for Retry-After: 1
  });

  it("does not retry a 400 and surfaces the server's message as an input error", async () => {
    const { url, seen } = await startDouble({
      "POST /v1/completions": json(400, { error: { message: "prompt too long for model" } }),
    });
    live.engine = new OpenAIEngine(opts(url));
    const err = await live.engine.run(tokenReq("p")).catch((e) => e);
    expect(err).toBeInstanceOf(EngineInputError);
    expect(String(err.message)).toMatch(/400.*prompt too long/);
    expect(seen.length).toBe(1);
  });

  it("gives up after the configured retries on persistent 5xx", async () => {
    const { url, seen } = await startDouble({ "POST /v1/completions": json(502, { error: "bad gateway" }) });
    live.engine = new OpenAIEngine(opts(url, { retries: 2 }));
    await expect(live.engine.run(tokenReq("p"))).rejects.toThrow(/failed after 3 attempt\(s\): HTTP 502/);
    expect(seen.length).toBe(3);
  });

  it("reports a refused connection clearly after retrying", async () => {
    const { url } = await startDouble({});
    await new Promise<void>((r) => live.double!.close(() => r()));
    live.double = undefined;
    live.engine = new OpenAIEngine(opts(url, { retries: 1 }));
    await expect(live.engine.run(tokenReq("p"))).rejects.toThrow(/ECONNREFUSED/);
    expect((await live.engine.health()).ok).toBe(false);
  });

  it("times out a server that never answers", async () => {
    const { url } = await startDouble({ "POST /v1/completions": () => {} });
    live.engine = new OpenAIEngine(opts(url, { headersTimeoutMs: 200, retries: 0 }));
    await expect(live.engine.run(tokenReq("p"))).rejects.toThrow(EngineUnavailableError);
    await expect(live.engine.run(tokenReq("p"))).rejects.toThrow(/HEADERS_TIMEOUT|timeout/i);
  });

  it("rejects a malformed stream event and an over-long request", async () => {
    const { url } = await startDouble({ "POST /v1/completions": sse(["{not json"]) });
    live.engine = new OpenAIEngine(opts(url, { maxContextTokens: 10 }));
    await expect(live.engine.run(tokenReq("p"))).rejects.toThrow(/malformed stream event/);
    await expect(live.engine.run(tokenReq("p", 8))).rejects.toThrow(EngineInputError);
  });

  it("aborts an in-flight stream", async () => {
    const { url } = await startDouble({
      "POST /v1/completions": (_q, _b, res) => {
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write(`data: ${JSON.stringify({ choices: [{ text: "a" }] })}\n\n`);
      },
    });
    live.engine = new OpenAIEngine(opts(url));
    const ac = new AbortController();
    const p = live.engine.run(tokenReq("p"), () => ac.abort(), ac.signal);
    await expect(p).rejects.toThrow(/abort/i);
  });
});

describe("remote engine: the server URL", () => {
  it("normalizes a trailing /v1 and slashes once, and keeps a proxy prefix", () => {
    expect(normalizeBaseUrl("http://127.0.0.1:8080/v1")).toBe("http://127.0.0.1:8080");
    expect(normalizeBaseUrl("http://127.0.0.1:8080/v1/")).toBe("http://127.0.0.1:8080");
    expect(normalizeBaseUrl("http://127.0.0.1:8080//")).toBe("http://127.0.0.1:8080");
    expect(normalizeBaseUrl("https://h.example/llm/v1")).toBe("https://h.example/llm");
    expect(normalizeBaseUrl("https://h.example/v1beta")).toBe("https://h.example/v1beta");
    const bad = OpenAIEngineOptionsSchema.safeParse({ baseUrl: "http://h:1/v1?x=1", model: "m" });
    expect(bad.success).toBe(false);
    expect(bad.error?.issues[0]?.message).toMatch(/query or fragment/);
  });

  it("sends to /v1/completions and /tokenize whether the URL ends in /v1 or not", async () => {
    const ok = sse([{ choices: [{ text: "x", finish_reason: "stop" }] }]);
    const { url, seen } = await startDouble({
      "POST /v1/completions": ok,
      "POST /tokenize": json(200, { tokens: [4, 2] }),
    });
    for (const base of [url, `${url}/`, `${url}/v1`, `${url}/v1/`]) {
      const e = new OpenAIEngine(opts(base));
      expect((await e.run(tokenReq("p"))).text).toBe("x");
      expect(Array.from(await e.tokenize("p"))).toEqual([4, 2]);
      await e.close();
    }
    expect(new Set(seen.map((x) => x.url))).toEqual(new Set(["/v1/completions", "/tokenize"]));
  });
});

describe("remote engine: the context limit, read from the server", () => {
  const models = (entries: object[]) => json(200, { object: "list", data: entries });
  const logged: string[] = [];
  const log = (msg: string) => logged.push(msg);
  afterEach(() => {
    logged.length = 0;
  });

  it("takes vLLM's max_model_len from /v1/models, and refuses a request beyond it", async () => {
    const { url } = await startDouble({
      "GET /v1/models": models([
        { id: "other", object: "model", max_model_len: 99 },
        { id: "m", object: "model", max_model_len: 1234 },
      ]),
    });
    live.engine = await OpenAIEngine.create(opts(url), log);
    expect(live.engine.info.maxContextTokens).toBe(1234);
    expect(live.engine.contextSource).toBe("server");
    await expect(live.engine.run(tokenReq("p", 1232))).rejects.toThrow(/context of 1234 tokens/);
    expect(logged).toEqual([]);
  });

  it("takes llama.cpp's per-slot n_ctx from /v1/models, or else from /props", async () => {
    const { url } = await startDouble({
      // llama.cpp names its one model by its path: not the name the node was given.
      "GET /v1/models": models([{ id: "/models/x.gguf", object: "model", meta: { n_ctx: 512 } }]),
    });
    live.engine = await OpenAIEngine.create(opts(url));
    expect(live.engine.info.maxContextTokens).toBe(512);
    await live.engine.close();
    live.double?.close();
    const props = await startDouble({
      "GET /props": json(200, { default_generation_settings: { n_ctx: 768 }, total_slots: 2 }),
    });
    live.engine = await OpenAIEngine.create(opts(props.url));
    expect(live.engine.info.maxContextTokens).toBe(768);
  });

  it("keeps the configured limit when the server reports none or an out-of-bounds one", async () => {
    const { url } = await startDouble({
      "GET /v1/models": models([{ id: "m", object: "model", max_model_len: 1e12 }]),
      "GET /props": json(200, { default_generation_settings: { n_ctx: -3 } }),
    });
    live.engine = await OpenAIEngine.create(opts(url, { maxContextTokens: 999 }), log);
    expect(live.engine.info.maxContextTokens).toBe(999);
    expect(live.engine.contextSource).toBe("configured");
    expect(logged).toEqual([expect.stringMatching(/reports no context limit/)]);
  });

  it("reads it once the server answers, when it was down as the engine started", async () => {
    const { url } = await startDouble({
      "GET /v1/models": [json(503, { error: "loading model" }), models([{ id: "m", max_model_len: 640 }])],
      "GET /health": json(200, { status: "ok" }),
    });
    live.engine = await OpenAIEngine.create(opts(url, { retries: 0 }), log);
    expect(live.engine.info.maxContextTokens).toBe(4096);
    expect(logged).toEqual([expect.stringMatching(/did not answer/)]);
    expect((await live.engine.health()).ok).toBe(true);
    expect(live.engine.info.maxContextTokens).toBe(640);
    expect(live.engine.contextSource).toBe("server");
  });
});

describe("remote engine settings (flag, env, YAML) reach the engine", () => {
  it("validates --engine-tokenizer and --engine-context-tokens with clear errors", () => {
    const base = { id: "A", engine: "openai", engineUrl: "http://127.0.0.1:1" };
    expect(resolveNodeSettings({ ...base, engineTokenizer: "server" }, {}).engineTokenizer).toBe("server");
    expect(resolveNodeSettings(base, { [envName("engineTokenizer")]: "local" }).engineTokenizer).toBe(
      "local",
    );
    expect(envName("engineTokenizer")).toBe("PREFIXMESH_ENGINE_TOKENIZER");
    const dir = mkdtempSync(join(tmpdir(), "pm-openai-settings-"));
    try {
      const yaml = join(dir, "node.yaml");
      writeFileSync(yaml, "engine-tokenizer: server\nengine-context-tokens: 1024\n");
      const fromFile = resolveNodeSettings({ ...base, config: yaml }, {});
      expect([fromFile.engineTokenizer, fromFile.engineContextTokens]).toEqual(["server", 1024]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect(() => resolveNodeSettings({ ...base, engineTokenizer: "gpt" }, {})).toThrow(
      /^--engine-tokenizer: must be one of auto, server, local, got 'gpt'$/,
    );
    expect(resolveNodeSettings({ ...base, engineContextTokens: "2048" }, {}).engineContextTokens).toBe(2048);
    expect(() => resolveNodeSettings({ ...base, engineContextTokens: "0" }, {})).toThrow(
      /^--engine-context-tokens: /,
    );
  });

  it("hands the tokenizer choice and the fallback context to the engine", async () => {
    const { url, seen } = await startDouble({ "POST /tokenize": json(200, { tokens: [7] }) });
    const s = resolveNodeSettings(
      { id: "A", engine: "openai", engineUrl: `${url}/v1`, model: "m" },
      { [envName("engineTokenizer")]: "local", [envName("engineContextTokens")]: "777" },
    );
    const e = await loadEngine(s);
    try {
      expect(Array.from(await e.tokenize("hello"))).toEqual(encode("hello"));
      expect(seen.filter((x) => x.url === "/tokenize")).toHaveLength(0);
      expect(e.info.maxContextTokens).toBe(777);
    } finally {
      await e.close();
    }
  });
});

describe("remote engine: its warnings reach the node's log", () => {
  it("hands a server that does not answer to the log given to loadEngine, not to stderr", async () => {
    const s = resolveNodeSettings(
      { id: "A", engine: "openai", engineUrl: "http://127.0.0.1:1", model: "m" },
      { [envName("engineTokenizer")]: "local" },
    );
    const said: string[] = [];
    const e = await loadEngine(s, (msg) => said.push(msg));
    try {
      expect(said.join("\n")).toMatch(/the server did not answer/);
    } finally {
      await e.close();
    }
  });
});

describe("remote engine: chat template and health", () => {
  it("uses llama.cpp's /apply-template when present, else the fallback template", async () => {
    const { url } = await startDouble({
      "POST /apply-template": json(200, { prompt: "<|user|>hi<|assistant|>" }),
    });
    live.engine = new OpenAIEngine(opts(url));
    expect(await live.engine.applyChatTemplate([{ role: "user", content: "hi" }])).toBe(
      "<|user|>hi<|assistant|>",
    );
    const fallback = new OpenAIEngine(opts(url, { chatTemplate: "fallback" }));
    expect(await fallback.applyChatTemplate([{ role: "user", content: "hi" }])).toBe("User: hi\nAssistant:");
    await fallback.close();
  });

  it("falls back only when /apply-template is absent, not when one request is refused", async () => {
    const chat = [{ role: "user" as const, content: "hi" }];
    const { url, seen } = await startDouble({
      "POST /apply-template": [
        // A proxy's body limit refusing one client's chat: that request's fault, not the endpoint's.
        json(413, { error: "request entity too large" }),
        json(200, { prompt: "<|user|>hi<|assistant|>" }),
        // A server without the endpoint.
        json(404, { error: "not found" }),
      ],
    });
    live.engine = new OpenAIEngine(opts(url));
    const refused = await live.engine.applyChatTemplate(chat).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(EngineInputError);
    expect((refused as EngineInputError).status).toBe(413);
    expect(await live.engine.applyChatTemplate(chat)).toBe("<|user|>hi<|assistant|>");
    expect(await live.engine.applyChatTemplate(chat)).toBe("User: hi\nAssistant:");
    // Absent: the fallback from then on, without asking again.
    expect(await live.engine.applyChatTemplate(chat)).toBe("User: hi\nAssistant:");
    expect(seen.filter((r) => r.url === "/apply-template")).toHaveLength(3);
  });

  it("aborts its /tokenize request when its signal aborts", async () => {
    let hung = false;
    let closed = false;
    const { url } = await startDouble({
      "POST /tokenize": [
        // The shape probe answers; the prompt's request never does: only the abort ends it.
        json(200, { tokens: [5, 6, 7], count: 3 }),
        (req) => {
          hung = true;
          req.socket.on("close", () => {
            closed = true;
          });
        },
      ],
    });
    live.engine = new OpenAIEngine(opts(url, { tokenizer: "server" }));
    const abort = new AbortController();
    const tokens = live.engine.tokenize("a prompt", abort.signal);
    const deadline = Date.now() + 10_000;
    while (!hung && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    abort.abort();
    await expect(tokens).rejects.toThrow(/abort/i);
    while (!closed && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(closed).toBe(true);
  });

  it("aborts its /apply-template request when its signal aborts", async () => {
    let arrived = false;
    let closed = false;
    const { url } = await startDouble({
      // Never answers: only the engine's abort ends the request.
      "POST /apply-template": (req) => {
        arrived = true;
        req.socket.on("close", () => {
          closed = true;
        });
      },
    });
    live.engine = new OpenAIEngine(opts(url));
    const abort = new AbortController();
    const rendering = live.engine.applyChatTemplate([{ role: "user", content: "hi" }], abort.signal);
    const deadline = Date.now() + 10_000;
    while (!arrived && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    abort.abort();
    await expect(rendering).rejects.toThrow(/abort/i);
    while (!closed && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(closed).toBe(true);
  });

  it("is healthy when /health answers 200 with an empty body (vLLM)", async () => {
    const { url } = await startDouble({ "GET /health": (_q, _b, res) => res.writeHead(200).end() });
    live.engine = new OpenAIEngine(opts(url));
    expect(await live.engine.health()).toEqual({ ok: true });
  });
});

describe("protocol helpers", () => {
  it("parses Retry-After seconds and HTTP dates", () => {
    expect(retryAfterMs("2", 0)).toBe(2000);
    expect(retryAfterMs(new Date(10_000).toUTCString(), 4_000)).toBe(6000);
    expect(retryAfterMs("soon", 0)).toBeUndefined();
  });

  it("parses SSE with CRLF, multi-line data, comments and split chunks", async () => {
    async function* body() {
      yield ': comment\r\ndata: {"a":\r\n';
      yield "data: 1}\r\n\r\nda";
      yield "ta: second\n\ndata: [DONE]\n\ndata: never\n\n";
    }
    const out: string[] = [];
    for await (const d of sseData(body())) out.push(d);
    expect(out).toEqual(['{"a":\n1}', "second"]);
  });

  it("bounds an event's data lines together, not only the unparsed buffer", async () => {
    const line = `data: ${"x".repeat(64 * 1024)}\n`;
    async function* body() {
      // Each chunk is small, but the event never ends: its data lines must not grow without bound.
      for (let i = 0; i <= MAX_SSE_EVENT_BYTES / (64 * 1024); i++) yield line;
      yield "\n";
    }
    const drain = async () => {
      for await (const _ of sseData(body()));
    };
    await expect(drain()).rejects.toThrow(/SSE event larger than/);
  });
});
