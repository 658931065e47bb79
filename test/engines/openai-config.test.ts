/**
 * The remote engine's configuration against a TEST DOUBLE of an OpenAI-compatible server
 * (openai-double.ts): the server URL, the context limit read from the server, its settings (flag, env,
 * YAML) and where its warnings go.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { encode } from "gpt-tokenizer";
import { afterEach, describe, expect, it } from "vitest";
import { OpenAIEngine } from "../../src/engines/openai/engine.js";
import { normalizeBaseUrl, OpenAIEngineOptionsSchema } from "../../src/engines/openai/options.js";
import { loadEngine } from "../../src/server/runtime/engine-loader.js";
import { envName, resolveNodeSettings } from "../../src/server/settings/index.js";
import { json, opts, scriptedDouble, sse, tokenReq } from "./openai-double.js";

const { live, startDouble } = scriptedDouble();

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
