/**
 * The remote engine's chat template and health checks against a TEST DOUBLE of an OpenAI-compatible
 * server (openai-double.ts), and the aborts of its /tokenize and /apply-template requests.
 */
import { describe, expect, it } from "vitest";
import { EngineInputError } from "../../src/engines/errors.js";
import { OpenAIEngine } from "../../src/engines/openai/engine.js";
import { json, opts, scriptedDouble } from "./openai-double.js";

const { live, startDouble } = scriptedDouble();

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
