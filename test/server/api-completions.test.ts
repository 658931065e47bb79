/**
 * The OpenAI-compatible API's completions and chat over a fake service (fake-service-api.ts):
 * answers, streams, sampling fields, refusals of bad input and overload, and the metrics they leave.
 */
import { describe, expect, it } from "vitest";
import { fakeServiceApi } from "./fake-service-api.js";

describe("OpenAI-compatible API (fake service)", () => {
  const api = fakeServiceApi({ bodyLimit: 64 * 1024 });
  const { service } = api;

  it("serves completions with usage.cached_tokens and served-by", async () => {
    const { data, response } = await api.client.completions
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
    const r = await api.client.chat.completions.create({
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
    const s = await api.client.completions.create({
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
    const cs = await api.client.chat.completions.create({
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
    const raw = await fetch(`${api.base}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "fake-model", prompt: "x", stream: true }),
    });
    expect(raw.headers.get("content-type")).toContain("text/event-stream");
    expect((await raw.text()).trimEnd().endsWith("data: [DONE]")).toBe(true);
  });

  it("answers bad input with OpenAI-style 4xx errors", async () => {
    const post = async (path: string, body: string) => {
      const r = await fetch(`${api.base}${path}`, {
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
    await expect(api.client.completions.create({ model: "fake-model", prompt: "" })).rejects.toMatchObject({
      status: 400,
    });
    // A path that is no valid percent-encoding is refused before routing: OpenAI's shape all the same.
    const badUrl = await fetch(`${api.base}/v1/%zz`);
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
      const r = await fetch(`${api.base}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "fake-model", prompt: "abc" }),
      });
      expect(r.status).toBe(429);
      expect(r.headers.get("retry-after")).toBe("2");
      const s = await fetch(`${api.base}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "fake-model", prompt: "abc", stream: true }),
      });
      expect(s.status).toBe(429);
    } finally {
      service.overloaded = false;
    }
  });
  it("passes presence_penalty and frequency_penalty to the node; 0 (the default) is left out", async () => {
    await api.client.completions.create({
      model: "fake-model",
      prompt: "abc",
      max_tokens: 2,
      presence_penalty: 0.5,
      frequency_penalty: -1,
    });
    expect(service.lastInput).toMatchObject({ presencePenalty: 0.5, frequencyPenalty: -1 });
    await api.client.chat.completions.create({
      model: "fake-model",
      messages: [{ role: "user", content: "hi" }],
      presence_penalty: 0,
      frequency_penalty: 1.25,
    });
    expect(service.lastInput?.presencePenalty).toBeUndefined();
    expect(service.lastInput?.frequencyPenalty).toBe(1.25);
  });

  it("exposes models, health, ready, cluster, dashboard and metrics", async () => {
    const models = await api.client.models.list();
    expect(models.data.map((m) => m.id)).toEqual(["fake-model"]);
    expect((await fetch(`${api.base}/health`)).status).toBe(200);
    expect((await fetch(`${api.base}/ready`)).status).toBe(200);
    expect(await (await fetch(`${api.base}/cluster`)).json()).toEqual({ id: "A", peers: [] });
    expect(await (await fetch(`${api.base}/dashboard`)).text()).toContain("<html");
    const m = await (await fetch(`${api.base}/metrics`)).text();
    expect(m).toMatch(/prefixmesh_requests_total\{[^}]*outcome="ok"[^}]*route="forwarded"[^}]*\} [1-9]/);
    expect(m).toMatch(/prefixmesh_requests_total\{[^}]*outcome="overloaded"/);
    expect(m).toContain("prefixmesh_request_duration_seconds_bucket");
    expect(m).toMatch(/prefixmesh_requests_served_by_total\{[^}]*served_by="B"[^}]*\} [1-9]/);
  });
});
