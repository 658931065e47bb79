/**
 * The shared `/tokenize` shape probe against a server that never answers it (a TEST DOUBLE on
 * 127.0.0.1): the probe is bounded by the engine's own headers timeout (failed once, not retried, and
 * found again by the next call) and by the engine's close (a stop never waits on it); a caller whose
 * signal aborts stops waiting on it at once, while the probe runs on for the others.
 */
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { EngineAbortedError, EngineUnavailableError } from "../../src/engines/errors.js";
import { OpenAIEngine } from "../../src/engines/openai/engine.js";
import { waitFor } from "../e2e/helpers.js";
import { closedAfterEach } from "./server-double.js";

const live = closedAfterEach<OpenAIEngine>();

/**
 * Test double: holds every `/tokenize` unanswered until `answer()` (then answers those held and the
 * rest, in vLLM's shape); counts them, and those whose client hung up.
 */
async function silentTokenizeDouble() {
  const probes = { sent: 0, cut: 0 };
  const held: ServerResponse[] = [];
  let answering = false;
  const reply = (res: ServerResponse) => res.writeHead(200).end(JSON.stringify({ tokens: [1, 2] }));
  const server = createServer((req, res) => {
    if (req.url !== "/tokenize") return void res.writeHead(404).end();
    probes.sent++;
    res.on("close", () => {
      if (!res.writableFinished) probes.cut++;
    });
    if (answering) reply(res);
    else held.push(res);
  });
  live.double = server;
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const answer = () => {
    answering = true;
    for (const res of held.splice(0)) reply(res);
  };
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, probes, answer };
}

const outcome = (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (e: unknown) => e,
  );

describe("a /tokenize shape probe the server never answers (test double)", () => {
  it("fails at the engine's headers timeout, unretried, and the next call probes again", async () => {
    const d = await silentTokenizeDouble();
    const engine = new OpenAIEngine({
      baseUrl: d.url,
      model: "m",
      tokenizer: "server",
      headersTimeoutMs: 300,
      retries: 3,
      cacheMirror: "lru",
    });
    live.engine = engine;
    for (const calls of [1, 2]) {
      const e = await outcome(engine.tokenize("a prompt"));
      expect(e).toBeInstanceOf(EngineUnavailableError);
      expect((e as Error).message).toMatch(/UND_ERR_HEADERS_TIMEOUT/);
      expect(d.probes.sent).toBe(calls);
    }
  }, 30_000);

  it("ends at once when the engine closes, its request cut", async () => {
    const d = await silentTokenizeDouble();
    const engine = new OpenAIEngine({ baseUrl: d.url, model: "m", tokenizer: "server", cacheMirror: "lru" });
    live.engine = engine;
    const waiting = outcome(engine.tokenize("a prompt"));
    await waitFor(() => d.probes.sent === 1, 10_000, "the probe to reach the double");
    const t0 = performance.now();
    await engine.close();
    const e = await waiting;
    // The engine's own headers timeout is minutes: only the close can have ended it this soon.
    expect(performance.now() - t0).toBeLessThan(10_000);
    expect((e as Error).message).toMatch(/engine was closed/);
    await waitFor(() => d.probes.cut === 1, 10_000, "the probe's request to be cut");
  }, 30_000);

  it("lets a caller whose signal aborts go at once, the probe running on for the others", async () => {
    const d = await silentTokenizeDouble();
    const engine = new OpenAIEngine({ baseUrl: d.url, model: "m", tokenizer: "server", cacheMirror: "lru" });
    live.engine = engine;
    const gone = new AbortController();
    let left: unknown;
    void outcome(engine.tokenize("a prompt", gone.signal)).then((e) => {
      left = e ?? "tokens";
    });
    let settled = false;
    const staying = engine.tokenize("another prompt").finally(() => {
      settled = true;
    });
    staying.catch(() => {}); // awaited below; a test failing before then leaves it to the close
    await waitFor(() => d.probes.sent === 1, 10_000, "the probe to reach the double");
    gone.abort();
    // The engine's own headers timeout is minutes: only the abort can end the wait within the deadline.
    await waitFor(() => left !== undefined, 10_000, "the aborted caller to stop waiting");
    expect(left).toBeInstanceOf(EngineAbortedError);
    // The other caller still waits on the shared probe, which, answered now, serves it.
    expect(settled).toBe(false);
    d.answer();
    expect(Array.from(await staying)).toEqual([1, 2]);
    // One probe (not cut by the abort), then the other caller's own request.
    expect(d.probes).toEqual({ sent: 2, cut: 0 });
  }, 30_000);
});
