/**
 * A client request taken in before shutdown is drained even while its prompt is still being
 * tokenized: a TEST DOUBLE of an OpenAI-compatible server (127.0.0.1 only, no inference) holds the
 * request's `/tokenize` until the test lets it go, and answers `/v1/completions` at once. Released
 * within the drain, the request completes 200, and the stop still ends within drain + grace; a
 * `/tokenize` is drained the same way.
 */
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import pino from "pino";
import { expect, it } from "vitest";
import { OpenAIEngine } from "../../src/engines/openai/engine.js";
import { ANSWER_GRACE_MS } from "../../src/server/runtime/close-grace.js";
import { type NodeHandle, startNode } from "../../src/server/runtime/start-node.js";
import { waitFor } from "../e2e/helpers.js";
import { closedAfterEach } from "../engines/server-double.js";
import { completionOutcome, loopbackNodeSettings, nodesStoppedAfterEach, soloNode } from "./helpers.js";

/** What a loaded machine may add to a bound before the timers fire (generous: shared cores). */
const SLACK_MS = 3_000;
const DRAIN_SEC = 5;

const live = closedAfterEach<OpenAIEngine>();
const keep = nodesStoppedAfterEach();

/** `/tokenize` (llama.cpp's shape) answers its shape probe at once and holds the rest in `held`. */
async function holdingDouble(): Promise<{ url: string; held: { res: ServerResponse; n: number }[] }> {
  const held: { res: ServerResponse; n: number }[] = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      if (req.url === "/tokenize") {
        const content = (JSON.parse(body) as { content?: unknown }).content;
        if (typeof content !== "string" || content === "Hello, world") {
          // The shape probe: vLLM's shape (no `content`) gets no tokens, llama.cpp's its own.
          const tokens = typeof content === "string" ? Array.from(content, (_, i) => i + 1) : [];
          res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ tokens }));
        } else held.push({ res, n: content.length });
        return;
      }
      if (req.url === "/v1/completions") {
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write(`data: ${JSON.stringify({ choices: [{ text: "x", finish_reason: "stop" }] })}\n\n`);
        res.end("data: [DONE]\n\n");
        return;
      }
      res.writeHead(404).end();
    });
  });
  live.double = server;
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, held };
}

/**
 * A node before the holding double; `ask` sends the request whose `/tokenize` the double holds. The
 * stop begins while it is held, then the tokenize is let go: the answer, the stop, and the tokens.
 */
async function heldWhenStopping<T>(ask: (node: NodeHandle) => Promise<T>) {
  const d = await holdingDouble();
  live.engine = new OpenAIEngine({ baseUrl: d.url, model: "m", tokenizer: "server", retries: 0 });
  await live.engine.tokenize("Hello, world");
  const settings = await loopbackNodeSettings({ calibrationMs: 0, drainSec: DRAIN_SEC });
  const node = keep(await startNode(settings, { logger: pino({ level: "silent" }), engine: live.engine }));
  const answer = ask(node);
  await waitFor(() => d.held.length === 1, 10_000, "the double to hold the request's /tokenize");
  const t0 = performance.now();
  const stopped = node.stop();
  const runtime = node.runtime;
  await waitFor(() => runtime.isStopping, 10_000, "the node to begin its stop");
  const h = d.held[0];
  if (!h) throw new Error("no held tokenize");
  const tokens = Array.from({ length: h.n }, (_, i) => i + 1);
  h.res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ tokens }));
  return { answer: await answer, stopped, t0, n: h.n };
}

it("completes a request whose tokenize is held when the stop begins and ends within the drain", async () => {
  const { answer: a, stopped, t0 } = await heldWhenStopping((node) => completionOutcome(node));
  expect(a.status, a.body).toBe(200);
  expect(JSON.parse(a.body)).toMatchObject({ choices: [{ text: "x" }] });
  await stopped;
  expect(performance.now() - t0).toBeLessThan(DRAIN_SEC * 1000 + ANSWER_GRACE_MS + SLACK_MS);
}, 60_000);

it("answers a /tokenize held when the stop begins, drained like a completion", async () => {
  const {
    answer: a,
    stopped,
    n,
  } = await heldWhenStopping((node) =>
    fetch(`${node.apiUrl}/tokenize`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ prompt: "Count these words" }),
    }).then(async (r) => ({ status: r.status, body: await r.text() })),
  );
  expect(a.status, a.body).toBe(200);
  expect(JSON.parse(a.body)).toMatchObject({ count: n });
  await stopped;
}, 60_000);

it("refuses requests arriving once the stop began, and one taken in but submitted past the drain", async () => {
  const solo = await soloNode(undefined, { drainSec: 0 });
  keep(solo.node);
  const runtime = solo.node.runtime;
  const early = runtime.admit();
  // No drain: the admission still open when it ends is not waited for.
  await solo.node.stop();
  expect(() => runtime.admit()).toThrow("node is shutting down");
  const input = { prompt: "hi", tokens: Uint32Array.of(1, 2), maxTokens: 1 };
  await expect(runtime.submit(input, {}, {}, early)).rejects.toThrow("node shut down before answering");
  await expect(runtime.submit(input, {}, {})).rejects.toThrow("node is shutting down");
});
