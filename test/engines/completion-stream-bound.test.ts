/**
 * llama-server's native stream is bounded by what the run asked for: generated ids that come without
 * text (which the text bound would catch) cannot grow without end. Against a TEST DOUBLE on 127.0.0.1.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { HttpClient } from "../../src/engines/http-client.js";
import { streamCompletion } from "../../src/engines/llama-slots/completion-stream.js";
import { closeDouble } from "./server-double.js";

const live: { server?: ReturnType<typeof createServer>; http?: HttpClient } = {};
afterEach(async () => {
  await live.http?.close();
  await closeDouble(live.server);
});

/** A double whose `/completion` streams `events` token-only events of `perEvent` ids, then a final one. */
async function double(events: number, perEvent: number): Promise<string> {
  live.server = createServer((_req, res) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    const ids = Array.from({ length: perEvent }, (_, i) => i);
    for (let i = 0; i < events; i++) res.write(`data: ${JSON.stringify({ content: "", tokens: ids })}\n\n`);
    res.end(`data: ${JSON.stringify({ content: "", stop: true, tokens_cached: 1 })}\n\n`);
  });
  await new Promise<void>((r) => live.server!.listen(0, "127.0.0.1", r));
  return `http://127.0.0.1:${(live.server.address() as AddressInfo).port}`;
}

const client = (url: string) => {
  live.http = new HttpClient(url, {
    connectTimeoutMs: 2_000,
    headersTimeoutMs: 10_000,
    bodyTimeoutMs: 10_000,
    retries: 0,
    backoffMs: 5,
    maxBackoffMs: 50,
  });
  return live.http;
};

const run = { slot: 0, tokens: Uint32Array.of(1, 2, 3), maxTokens: 4, sampling: {}, reuse: true };

describe("llama-server's generated ids", () => {
  it("are taken up to what n_predict allows", async () => {
    const r = await streamCompletion(client(await double(2, 2)), run, () => {}, undefined, undefined);
    expect(r.generated).toHaveLength(4);
  });

  it("are taken past n_predict by a speculative step's overshoot", async () => {
    const r = await streamCompletion(client(await double(1, 500)), run, () => {}, undefined, undefined);
    expect(r.generated).toHaveLength(500);
  });

  it("fail the run when the server sends far more than n_predict allows", async () => {
    const url = await double(200, 1000);
    await expect(streamCompletion(client(url), run, () => {}, undefined, undefined)).rejects.toThrow(
      /sent \d+ generated tokens for n_predict 4$/,
    );
  });
});
