/**
 * The shared `/tokenize` shape probe against a server that never answers it (a TEST DOUBLE on
 * 127.0.0.1): the probe is bounded by the engine's own headers timeout (failed once, not retried, and
 * found again by the next call) and by the engine's close (a stop never waits on it).
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { EngineUnavailableError } from "../../src/engines/errors.js";
import { OpenAIEngine } from "../../src/engines/openai/engine.js";
import { waitFor } from "../e2e/helpers.js";
import { closedAfterEach } from "./server-double.js";

const live = closedAfterEach<OpenAIEngine>();

/** Test double: holds every `/tokenize` unanswered; counts them, and those whose client hung up. */
async function silentTokenizeDouble() {
  const probes = { sent: 0, cut: 0 };
  const server = createServer((req, res) => {
    if (req.url !== "/tokenize") return void res.writeHead(404).end();
    probes.sent++;
    res.on("close", () => probes.cut++);
  });
  live.double = server;
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, probes };
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
});
