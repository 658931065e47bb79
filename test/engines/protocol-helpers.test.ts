/** The HTTP engines' protocol helpers: Retry-After parsing and the SSE reader. */
import { describe, expect, it } from "vitest";
import { retryAfterMs } from "../../src/engines/http-client.js";
import { MAX_SSE_EVENT_BYTES, sseData } from "../../src/engines/sse.js";

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
