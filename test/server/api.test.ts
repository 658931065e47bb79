import type { FastifyInstance } from "fastify";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChatMessage, Tokens } from "../../src/core/engine.js";
import { buildApi } from "../../src/server/api.js";
import { createMetrics } from "../../src/server/metrics.js";
import {
  type InferenceInput,
  type NodeService,
  type ServeEvents,
  type ServeOutcome,
  ServiceError,
} from "../../src/server/service.js";

/** A fake service for API tests only: one token per character, echoes the prompt's length as output. */
class FakeService implements NodeService {
  nodeId = "A";
  modelId = "fake-model";
  maxContextTokens = 256;
  lastInput: InferenceInput | undefined;
  overloaded = false;
  async tokenize(text: string): Promise<Tokens> {
    return Uint32Array.from([...text].map((c) => c.charCodeAt(0)));
  }
  async applyChatTemplate(messages: ChatMessage[]): Promise<string> {
    return messages.map((m) => `<${m.role}>${m.content}`).join("") + "<assistant>";
  }
  async submit(input: InferenceInput, events: ServeEvents): Promise<ServeOutcome> {
    this.lastInput = input;
    if (this.overloaded) throw new ServiceError(429, "rate_limit_error", "node overloaded", 2);
    const pieces = ["hel", "lo"];
    for (const p of pieces) events.onChunk?.(p, "B");
    return {
      reqId: "A-1",
      servedBy: "B",
      hops: 1,
      timing: { queueMs: 0.25, prefillMs: 1, decodeMs: 1, networkMs: 0.4567891, totalMs: 2.7067891 },
      fallbacks: 1,
      result: {
        text: pieces.join(""),
        completionTokens: 2,
        promptTokens: input.tokens.length,
        cachedTokens: 3,
        prefillMs: 1,
        decodeMs: 1,
        finishReason: "stop",
      },
    };
  }
  ready() {
    return { ok: true };
  }
  clusterView() {
    return { id: "A", peers: [] };
  }
}

describe("OpenAI-compatible API (fake service)", () => {
  const service = new FakeService();
  const metrics = createMetrics("A");
  let app: FastifyInstance;
  let base: string;
  let client: OpenAI;

  beforeAll(async () => {
    app = buildApi({ service, metrics, bodyLimit: 64 * 1024 });
    base = await app.listen({ host: "127.0.0.1", port: 0 });
    client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "unused", maxRetries: 0 });
  });
  afterAll(async () => {
    await app.close();
  });

  it("serves completions with usage.cached_tokens and served-by", async () => {
    const { data, response } = await client.completions
      .create({ model: "fake-model", prompt: "abc", max_tokens: 4 })
      .withResponse();
    expect(data.choices[0]?.text).toBe("hello");
    expect(data.usage?.prompt_tokens).toBe(3);
    expect(
      (data.usage as { prompt_tokens_details?: { cached_tokens: number } }).prompt_tokens_details
        ?.cached_tokens,
    ).toBe(3);
    expect(response.headers.get("x-prefixmesh-served-by")).toBe("B");
    expect(response.headers.get("x-prefixmesh-hops")).toBe("1");
    expect(service.lastInput?.maxTokens).toBe(4);
    // Where the time went: in the body (to the microsecond) and as a Server-Timing header.
    expect((data as unknown as { prefixmesh: unknown }).prefixmesh).toEqual({
      served_by: "B",
      hops: 1,
      request_id: "A-1",
      fallbacks: 1,
      timing_ms: { queue: 0.25, prefill: 1, decode: 1, network: 0.457, total: 2.707 },
    });
    expect(response.headers.get("server-timing")).toBe(
      "queue;dur=0.25, prefill;dur=1, decode;dur=1, network;dur=0.457, total;dur=2.707",
    );
  });

  it("serves chat; the routing key covers every message", async () => {
    const r = await client.chat.completions.create({
      model: "fake-model",
      messages: [
        { role: "system", content: "sys" },
        { role: "user", content: "q1" },
        { role: "assistant", content: "a1" },
        { role: "user", content: "q2" },
      ],
      max_tokens: 5,
    });
    expect(r.choices[0]?.message.content).toBe("hello");
    expect(service.lastInput?.prompt).toBe("<system>sys<user>q1<assistant>a1<user>q2<assistant>");
  });

  it("streams completions and chat over SSE ending in [DONE]", async () => {
    const s = await client.completions.create({
      model: "fake-model",
      prompt: "abc",
      max_tokens: 4,
      stream: true,
    });
    let text = "";
    const tails: unknown[] = [];
    for await (const c of s) {
      text += c.choices[0]?.text ?? "";
      if (c.choices[0]?.finish_reason) tails.push((c as unknown as { prefixmesh: unknown }).prefixmesh);
    }
    expect(text).toBe("hello");
    // The final choice chunk says where the time went, without the usage chunk being asked for.
    expect(tails).toEqual([
      {
        served_by: "B",
        hops: 1,
        request_id: "A-1",
        fallbacks: 1,
        timing_ms: { queue: 0.25, prefill: 1, decode: 1, network: 0.457, total: 2.707 },
      },
    ]);
    const cs = await client.chat.completions.create({
      model: "fake-model",
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 4,
      stream: true,
      stream_options: { include_usage: true },
    });
    let ct = "";
    let usage: unknown;
    for await (const c of cs) {
      ct += c.choices[0]?.delta?.content ?? "";
      if (c.usage) usage = c.usage;
    }
    expect(ct).toBe("hello");
    expect(usage).toMatchObject({ prompt_tokens_details: { cached_tokens: 3 } });
    const raw = await fetch(`${base}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "fake-model", prompt: "x", stream: true }),
    });
    expect(raw.headers.get("content-type")).toContain("text/event-stream");
    expect((await raw.text()).trimEnd().endsWith("data: [DONE]")).toBe(true);
  });

  it("answers bad input with OpenAI-style 4xx errors", async () => {
    const post = async (path: string, body: string) => {
      const r = await fetch(`${base}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body,
      });
      return {
        status: r.status,
        json: (await r.json()) as { error: { message: string; type: string; code?: string } },
      };
    };
    const bad = await post("/v1/completions", JSON.stringify({ model: "fake-model", prompt: 42 }));
    expect(bad.status).toBe(400);
    expect(bad.json.error.type).toBe("invalid_request_error");
    expect((await post("/v1/completions", "{not json")).status).toBe(400);
    const unknown = await post("/v1/completions", JSON.stringify({ model: "nope", prompt: "x" }));
    expect(unknown.status).toBe(404);
    expect(unknown.json.error.message).toContain("fake-model");
    const long = await post(
      "/v1/completions",
      JSON.stringify({ model: "fake-model", prompt: "x".repeat(300) }),
    );
    expect(long.status).toBe(400);
    expect(long.json.error.message).toContain("context");
    // OpenAI's code for it, which `prefixmesh bench` counts apart from failures.
    expect(long.json.error.code).toBe("context_length_exceeded");
    const n2 = await post(
      "/v1/chat/completions",
      JSON.stringify({ model: "fake-model", n: 2, messages: [{ role: "user", content: "x" }] }),
    );
    expect(n2.status).toBe(400);
    const huge = await post(
      "/v1/completions",
      JSON.stringify({ model: "fake-model", prompt: "x".repeat(100_000) }),
    );
    expect(huge.status).toBe(413);
    await expect(client.completions.create({ model: "fake-model", prompt: "" })).rejects.toMatchObject({
      status: 400,
    });
    // A path that is no valid percent-encoding is refused before routing: OpenAI's shape all the same.
    const badUrl = await fetch(`${base}/v1/%zz`);
    expect(badUrl.status).toBe(400);
    expect(await badUrl.json()).toEqual({
      error: {
        message: "'/v1/%zz' is not a valid url component",
        type: "invalid_request_error",
        param: null,
        code: null,
      },
    });
  });

  it("refuses on overload with 429 and Retry-After", async () => {
    service.overloaded = true;
    try {
      const r = await fetch(`${base}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "fake-model", prompt: "abc" }),
      });
      expect(r.status).toBe(429);
      expect(r.headers.get("retry-after")).toBe("2");
      const s = await fetch(`${base}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "fake-model", prompt: "abc", stream: true }),
      });
      expect(s.status).toBe(429);
    } finally {
      service.overloaded = false;
    }
  });

  it("retrieves one model as OpenAI's client does (GET /v1/models/{model}); an unknown one is 404", async () => {
    const m = await client.models.retrieve("fake-model");
    expect(m).toMatchObject({ id: "fake-model", object: "model", max_model_len: 256 });
    await expect(client.models.retrieve("nope")).rejects.toMatchObject({
      status: 404,
      code: "model_not_found",
    });
    // A model id with a slash (Hugging Face style), sent raw as some clients do.
    const r = await fetch(`${base}/v1/models/org/other`);
    expect(r.status).toBe(404);
    expect(((await r.json()) as { error: { message: string } }).error.message).toContain("'org/other'");
  });

  it("passes presence_penalty and frequency_penalty to the node; 0 (the default) is left out", async () => {
    await client.completions.create({
      model: "fake-model",
      prompt: "abc",
      max_tokens: 2,
      presence_penalty: 0.5,
      frequency_penalty: -1,
    });
    expect(service.lastInput).toMatchObject({ presencePenalty: 0.5, frequencyPenalty: -1 });
    await client.chat.completions.create({
      model: "fake-model",
      messages: [{ role: "user", content: "hi" }],
      presence_penalty: 0,
      frequency_penalty: 1.25,
    });
    expect(service.lastInput?.presencePenalty).toBeUndefined();
    expect(service.lastInput?.frequencyPenalty).toBe(1.25);
  });

  it("answers a known path asked with the wrong method 405 with Allow; an unknown path 404", async () => {
    const cases: [string, string, string][] = [
      ["POST", "/health", "GET, HEAD"],
      ["GET", "/v1/completions", "POST"],
      ["DELETE", "/v1/chat/completions?x=1", "POST"],
      ["PUT", "/v1/models/org/name", "GET, HEAD"],
      ["POST", "/dashboard/app.js", "GET, HEAD"],
    ];
    for (const [method, path, allow] of cases) {
      const r = await fetch(`${base}${path}`, { method });
      expect(r.status, `${method} ${path}`).toBe(405);
      expect(r.headers.get("allow"), path).toBe(allow);
      const body = (await r.json()) as { error: { type: string; message: string } };
      expect(body.error.type).toBe("invalid_request_error");
      expect(body.error.message).toContain(`allowed: ${allow}`);
    }
    const none = await fetch(`${base}/v2/completions`, { method: "POST" });
    expect(none.status).toBe(404);
    expect(none.headers.get("allow")).toBeNull();
  });

  it("exposes models, health, ready, cluster, dashboard and metrics", async () => {
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual(["fake-model"]);
    expect((await fetch(`${base}/health`)).status).toBe(200);
    expect((await fetch(`${base}/ready`)).status).toBe(200);
    expect(await (await fetch(`${base}/cluster`)).json()).toEqual({ id: "A", peers: [] });
    expect(await (await fetch(`${base}/dashboard`)).text()).toContain("<html");
    const m = await (await fetch(`${base}/metrics`)).text();
    expect(m).toMatch(/prefixmesh_requests_total\{[^}]*outcome="ok"[^}]*route="forwarded"[^}]*\} [1-9]/);
    expect(m).toMatch(/prefixmesh_requests_total\{[^}]*outcome="overloaded"/);
    expect(m).toContain("prefixmesh_request_duration_seconds_bucket");
    expect(m).toMatch(/prefixmesh_requests_served_by_total\{[^}]*served_by="B"[^}]*\} [1-9]/);
  });

  it("serves the dashboard at / and /dashboard under a strict CSP, with uPlot from node_modules", async () => {
    for (const path of ["/", "/dashboard"]) {
      const r = await fetch(`${base}${path}`);
      expect(r.status).toBe(200);
      expect(r.headers.get("content-type")).toContain("text/html");
      const csp = r.headers.get("content-security-policy") ?? "";
      expect(csp).toContain("default-src 'none'");
      expect(csp).toContain("script-src 'self'");
      expect(csp).not.toContain("unsafe-inline");
      const html = await r.text();
      // No inline script or style: every script and sheet is a file of this origin.
      expect(html).not.toMatch(/<script>|<style|style=/);
      expect(html).toContain('src="/dashboard/uplot.js"');
    }
    const uplot = await fetch(`${base}/dashboard/uplot.js`);
    expect(uplot.status).toBe(200);
    expect(uplot.headers.get("content-type")).toContain("javascript");
    expect(await uplot.text()).toContain("uPlot");
    expect((await fetch(`${base}/dashboard/uplot.css`)).status).toBe(200);
    expect((await fetch(`${base}/dashboard/app.css`)).status).toBe(200);
    // The page's modules are dashboard files (served from the build; 503 when run unbuilt), never 404.
    for (const file of [
      "app.js",
      "dom.js",
      "charts.js",
      "series.js",
      "refused.js",
      "departed.js",
      "membership.js",
      "membership-view.js",
    ])
      expect((await fetch(`${base}/dashboard/${file}`)).status, file).not.toBe(404);
    const missing = await fetch(`${base}/dashboard/..%2F..%2Fpackage.json`);
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { error: { message: string } }).error.message).toContain(
      "no dashboard file",
    );
  });

  it("states the model's context and counts a text's tokens (vLLM's and llama.cpp's /tokenize shapes)", async () => {
    const models = (await (await fetch(`${base}/v1/models`)).json()) as { data: { max_model_len: number }[] };
    expect(models.data[0]?.max_model_len).toBe(service.maxContextTokens);
    const post = (body: unknown) =>
      fetch(`${base}/tokenize`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    const vllm = await post({ model: "fake-model", prompt: "abcd" });
    expect(vllm.status).toBe(200);
    expect(await vllm.json()).toEqual({ tokens: [97, 98, 99, 100], count: 4, max_model_len: 256 });
    expect(await (await post({ content: "xy" })).json()).toMatchObject({ count: 2 });
    const neither = await post({ model: "fake-model" });
    expect(neither.status).toBe(400);
    expect(((await neither.json()) as { error: { param: string } }).error.param).toBe("prompt");
    expect((await post({ prompt: "a", content: "b" })).status).toBe(400);
    const wrongModel = await post({ model: "other", prompt: "a" });
    expect(wrongModel.status).toBe(404);
    expect(((await wrongModel.json()) as { error: { code: string } }).error.code).toBe("model_not_found");
    // Bounded like every request: the API's body limit (64 KiB in this test).
    expect((await post({ prompt: "x".repeat(70 * 1024) })).status).toBe(413);
  });
});

describe("OpenAI-compatible API: max_tokens default and ceiling", () => {
  const service = new FakeService();
  let app: FastifyInstance;
  let base: string;
  beforeAll(async () => {
    app = buildApi({
      service,
      metrics: createMetrics("A"),
      defaultMaxTokens: 16,
      chatDefaultMaxTokens: 64,
      maxTokensCeiling: 100,
    });
    base = await app.listen({ host: "127.0.0.1", port: 0 });
  });
  afterAll(async () => {
    await app.close();
  });
  const post = async (path: string, body: object) => {
    const r = await fetch(`${base}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "fake-model", ...body }),
    });
    return {
      status: r.status,
      json: (await r.json()) as { error?: { message: string; param: string; code: string } },
    };
  };
  const chat = (extra: object, content = "hi") =>
    post("/v1/chat/completions", { messages: [{ role: "user", content }], ...extra });

  it("a chat without a limit gets the default, not the rest of the context", async () => {
    expect((await chat({})).status).toBe(200);
    expect(service.lastInput?.maxTokens).toBe(64);
    // At most the room the prompt leaves (context 256).
    expect((await chat({}, "x".repeat(220))).status).toBe(200);
    expect(service.lastInput?.maxTokens).toBe(256 - service.lastInput!.tokens.length);
    expect((await post("/v1/completions", { prompt: "abc" })).status).toBe(200);
    expect(service.lastInput?.maxTokens).toBe(16);
  });

  it("above the ceiling: 400 with a JSON error naming max_tokens; at it: served", async () => {
    for (const r of [
      await chat({ max_tokens: 101 }),
      await chat({ max_completion_tokens: 5_000 }),
      await post("/v1/completions", { prompt: "abc", max_tokens: 101 }),
    ]) {
      expect(r.status).toBe(400);
      expect(r.json.error?.param).toBe("max_tokens");
      expect(r.json.error?.code).toBe("max_tokens_exceeded");
      expect(r.json.error?.message).toContain("ceiling of 100");
    }
    expect((await chat({ max_tokens: 100 })).status).toBe(200);
    expect(service.lastInput?.maxTokens).toBe(100);
  });
});
