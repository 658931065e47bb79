/**
 * The remote engine's completions against a TEST DOUBLE of an OpenAI-compatible server
 * (openai-double.ts): streaming, usage and cache reports, sampling fields, retries, timeouts, aborts.
 * The same engine against a real llama.cpp server: llama-server.test.ts.
 */
import { describe, expect, it } from "vitest";
import { EngineInputError, EngineUnavailableError } from "../../src/engines/errors.js";
import { OpenAIEngine } from "../../src/engines/openai/engine.js";
import { json, opts, scriptedDouble, sse, tokenReq } from "./openai-double.js";

const { live, startDouble } = scriptedDouble();

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

  it("fails a run whose stream carries the server's error event, not a truncated success", async () => {
    const { url } = await startDouble({
      "POST /v1/completions": [
        sse([
          { choices: [{ text: "Hel", finish_reason: null }] },
          { error: { message: "CUDA out of memory", type: "InternalServerError", code: 500 } },
        ]),
        sse([
          { choices: [{ text: "Hel", finish_reason: null }] },
          { object: "error", message: "engine dead", type: "InternalServerError", code: 500 },
        ]),
      ],
    });
    live.engine = new OpenAIEngine(opts(url));
    await expect(live.engine.run(tokenReq("p", 4))).rejects.toThrow(/mid-stream.*CUDA out of memory/);
    await expect(live.engine.run(tokenReq("p", 4))).rejects.toThrow(/mid-stream.*engine dead/);
  });

  it("takes null error and object keys as no error, and an error event without a reason", async () => {
    const { url } = await startDouble({
      "POST /v1/completions": [
        sse([
          { object: null, error: null, choices: [{ text: "Hi", finish_reason: null }] },
          { object: "text_completion", choices: [{ text: "!", finish_reason: "stop" }] },
        ]),
        sse([{ choices: [{ text: "Hel", finish_reason: null }] }, { object: "error" }]),
      ],
    });
    live.engine = new OpenAIEngine(opts(url));
    expect((await live.engine.run(tokenReq("p", 4))).text).toBe("Hi!");
    await expect(live.engine.run(tokenReq("p", 4))).rejects.toThrow(/mid-stream: "no reason given"/);
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

  it("believes no negative, fractional, absurd or more-than-the-prompt usage: not reported", async () => {
    const answer = (usage: object, timings?: object) =>
      sse([
        { choices: [{ text: "A", finish_reason: "stop" }] },
        { choices: [], usage, ...(timings ? { timings } : {}) },
      ]);
    const { url } = await startDouble({
      "POST /v1/completions": [
        answer({ prompt_tokens: -3, completion_tokens: 2.5, prompt_tokens_details: { cached_tokens: -1 } }),
        answer({ prompt_tokens: 3, completion_tokens: 1, prompt_tokens_details: { cached_tokens: 7 } }),
        answer(
          { prompt_tokens: 1e12, completion_tokens: 1e12, prompt_tokens_details: { cached_tokens: 1.5 } },
          { prompt_ms: -4, predicted_ms: 1e15 },
        ),
        answer({ prompt_tokens: 3, completion_tokens: 1, prompt_tokens_details: { cached_tokens: 3 } }),
      ],
    });
    live.engine = new OpenAIEngine(opts(url));
    const req = tokenReq("p");
    const fallback = { promptTokens: req.tokens.length, completionTokens: 1, cachedTokens: 0 };
    const negative = await live.engine.run(req);
    expect(negative).toMatchObject({ ...fallback, cacheReported: false });
    // More cached than the prompt the server itself counted.
    expect(await live.engine.run(req)).toMatchObject({
      promptTokens: 3,
      cachedTokens: 0,
      cacheReported: false,
    });
    const absurd = await live.engine.run(req);
    expect(absurd).toMatchObject({ ...fallback, cacheReported: false });
    expect(absurd.prefillMs).toBeGreaterThanOrEqual(0);
    expect(absurd.decodeMs).toBeLessThan(60_000);
    expect(await live.engine.run(req)).toMatchObject({
      promptTokens: 3,
      cachedTokens: 3,
      cacheReported: true,
    });
    // Only the believed report was compared with the prediction.
    expect(live.engine.cacheStatus()).toMatchObject({ accuracy: { requests: 1 } });
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
    await expect(live.engine.run(tokenReq("p"))).rejects.toThrow(
      /HEADERS_TIMEOUT \(no response within 200 ms: the server is stalled/,
    );
  });

  it("says a stream that stalls mid-way timed out", async () => {
    const { url } = await startDouble({
      "POST /v1/completions": (_q, _b, res) => {
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write(`data: ${JSON.stringify({ choices: [{ text: "a" }] })}\n\n`);
      },
    });
    live.engine = new OpenAIEngine(opts(url, { bodyTimeoutMs: 200, retries: 0 }));
    await expect(live.engine.run(tokenReq("p"))).rejects.toThrow(/stopped sending mid-stream for 200 ms/);
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
