/**
 * Stopping a node whose remote engine has stalled: a TEST DOUBLE of an OpenAI-compatible server
 * (127.0.0.1 only, no inference) accepts `/tokenize` and `/v1/completions` and never answers them.
 * The stop must end within the drain bound (plus the answer grace), not wait out the engine's
 * headers timeout, and the client of the held request must get an answer, not a hang.
 */
import pino from "pino";
import { describe, expect, it } from "vitest";
import { EngineUnavailableError } from "../../src/engines/errors.js";
import { OpenAIEngine } from "../../src/engines/openai/engine.js";
import { ANSWER_GRACE_MS } from "../../src/server/runtime/close-grace.js";
import { startNode } from "../../src/server/runtime/start-node.js";
import { waitFor } from "../e2e/helpers.js";
import { closedAfterEach, stallingDouble } from "../engines/server-double.js";
import { completionOutcome, loopbackNodeSettings, nodesStoppedAfterEach } from "./helpers.js";

/** What a loaded machine may add to a bound before the timers fire (generous: shared cores). */
const SLACK_MS = 3_000;
const DRAIN_SEC = 1;

const live = closedAfterEach<OpenAIEngine>();
const keep = nodesStoppedAfterEach();

describe("closing a remote engine whose server stalls (test double)", () => {
  it("ends the held /tokenize and /v1/completions at once, each with a clear error", async () => {
    const d = await stallingDouble(live, "404");
    live.engine = new OpenAIEngine({ baseUrl: d.url, model: "m", retries: 0, cacheMirror: "lru" });
    const engine = live.engine;
    await engine.tokenize("Hello, world");
    const tokens = engine.tokenize("a prompt the server holds").then(
      () => undefined,
      (e: unknown) => e,
    );
    const run = engine.run({ id: "r", tokens: Uint32Array.of(1, 2), prompt: "hi", maxTokens: 2 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    await waitFor(() => d.held.length === 2, 10_000, "the double to hold both requests");
    const t0 = performance.now();
    await engine.close();
    expect(performance.now() - t0).toBeLessThan(SLACK_MS);
    for (const e of [await tokens, await run]) {
      expect(e).toBeInstanceOf(EngineUnavailableError);
      expect((e as Error).message).toMatch(/engine was closed/);
    }
    await waitFor(() => d.closed.length === 2, 10_000, "the held requests to be cut");
  });
});

describe("stopping a node whose remote engine stalls (test double)", () => {
  it.each([
    ["/tokenize", "server"],
    ["/v1/completions", "local"],
  ] as const)(
    "ends within the drain bound with %s held",
    async (path, tokenizer) => {
      const d = await stallingDouble(live, "404");
      live.engine = new OpenAIEngine({
        baseUrl: d.url,
        model: "m",
        tokenizer,
        retries: 0,
        cacheMirror: "lru",
      });
      await live.engine.tokenize("Hello, world");
      const settings = await loopbackNodeSettings({
        calibrationMs: 0,
        drainSec: DRAIN_SEC,
      });
      const node = keep(
        await startNode(settings, { logger: pino({ level: "silent" }), engine: live.engine }),
      );
      const answer = completionOutcome(node);
      await waitFor(() => d.held.includes(path), 10_000, `the double to hold ${path}`);
      const t0 = performance.now();
      await node.stop();
      const ms = performance.now() - t0;
      expect(ms).toBeLessThan(DRAIN_SEC * 1000 + ANSWER_GRACE_MS + SLACK_MS);
      // The client of the held request is answered: an OpenAI-style 5xx, not a dropped connection.
      const a = await answer;
      expect(a.status).toBe(503);
      expect(JSON.parse(a.body)).toMatchObject({
        error: { message: "node shut down before answering", type: "server_error" },
      });
      await waitFor(() => d.closed.includes(path), 10_000, "the held request to be aborted");
    },
    60_000,
  );
});

describe("stopping a node with an engine run still in flight (test double)", () => {
  it("aborts the run at the end of the drain: no 'engine run failed' warn", async () => {
    const d = await stallingDouble(live, "404");
    live.engine = new OpenAIEngine({
      baseUrl: d.url,
      model: "m",
      tokenizer: "local",
      retries: 0,
      cacheMirror: "lru",
    });
    await live.engine.tokenize("Hello, world");
    const lines: Record<string, unknown>[] = [];
    const logger = pino({ level: "warn" }, { write: (l: string) => void lines.push(JSON.parse(l)) });
    const settings = await loopbackNodeSettings({ calibrationMs: 0, drainSec: DRAIN_SEC });
    const node = keep(await startNode(settings, { logger, engine: live.engine }));
    const answer = fetch(`${node.apiUrl}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m", prompt: "Tell me a story about the sea", max_tokens: 4 }),
    }).then((res) => res.status);
    await waitFor(() => d.held.includes("/v1/completions"), 10_000, "the double to hold the run");
    await node.stop();
    expect(await answer).toBe(503);
    await waitFor(() => d.closed.includes("/v1/completions"), 10_000, "the held run to be cut");
    // The stop's own cut of the run is no engine failure: operators must not be told one.
    expect(lines.filter((l) => l.msg === "engine run failed")).toEqual([]);
  }, 60_000);
});
