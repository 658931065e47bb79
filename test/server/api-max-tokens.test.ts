/** The OpenAI-compatible API's max_tokens: the defaults a request without one gets, and the ceiling. */
import { describe, expect, it } from "vitest";
import { fakeServiceApi } from "./fake-service-api.js";

describe("OpenAI-compatible API: max_tokens default and ceiling", () => {
  const api = fakeServiceApi({ defaultMaxTokens: 16, chatDefaultMaxTokens: 64, maxTokensCeiling: 100 });
  const { service } = api;
  const post = async (path: string, body: object) => {
    const r = await fetch(`${api.base}${path}`, {
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
