/**
 * A run the node's own engine fails reaches the OpenAI client by whose fault it is, as a failed
 * tokenize step's does (engine-step-errors.ts): the server refused the prompt, a 400 with its
 * reason; its rate limit or overload, a 503 with its (bounded) Retry-After; down, a 502. And a run
 * a peer's engine fails for a forward falls back (a peer's word that the prompt is bad does not end
 * the request): the entry node's own engine answers. The engine is a TEST DOUBLE of an OpenAI-compatible
 * server on 127.0.0.1 (no inference): `/tokenize` answers a token per character, so the nodes'
 * tokens agree; `/v1/completions` answers as its `completions` says.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { OpenAIEngine } from "../../src/engines/openai/engine.js";
import { freePort } from "../../src/server/cluster/launcher.js";
import { type NodeHandle, startNode } from "../../src/server/runtime/start-node.js";
import { closeDouble, withBody } from "../engines/server-double.js";
import { loopbackNodeSettings, nodesStoppedAfterEach, routedPair } from "./helpers.js";

/** What the double's `/v1/completions` answers: a stream of "ok", or this status and Retry-After. */
interface Completions {
  status?: number;
  retryAfter?: string;
  asked: number;
}

const doubles: Server[] = [];
const engines: OpenAIEngine[] = [];
const keep = nodesStoppedAfterEach();
afterEach(async () => {
  await Promise.all(engines.splice(0).map((e) => e.close()));
  await Promise.all(doubles.splice(0).map(closeDouble));
});

async function double(completions: Completions): Promise<string> {
  const server = createServer((req, res) => {
    withBody(req, (body) => {
      const json = { "content-type": "application/json" };
      if (req.url === "/tokenize") {
        const content = String((JSON.parse(body) as { content?: unknown }).content ?? "");
        res.writeHead(200, json).end(JSON.stringify({ tokens: Array.from(content, (c) => c.charCodeAt(0)) }));
      } else if (req.url !== "/v1/completions") res.writeHead(404).end();
      else if (completions.status === undefined) {
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.end(
          `data: ${JSON.stringify({ choices: [{ text: "ok", finish_reason: "stop" }] })}\n\ndata: [DONE]\n\n`,
        );
      } else {
        completions.asked++;
        const retry = completions.retryAfter ? { "retry-after": completions.retryAfter } : {};
        const why = `refused with ${completions.status}`;
        res
          .writeHead(completions.status, { ...json, ...retry })
          .end(JSON.stringify({ error: { message: why } }));
      }
    });
  });
  doubles.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function engineAt(url: string, tokenizer: "server" | "local" = "server"): OpenAIEngine {
  const engine = new OpenAIEngine({ baseUrl: url, model: "m", retries: 0, cacheMirror: "lru", tokenizer });
  engines.push(engine);
  return engine;
}

async function complete(node: NodeHandle, prompt: string, stream = false) {
  const res = await fetch(`${node.apiUrl}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "m", prompt, max_tokens: 4, stream }),
  });
  const body = (await res.json()) as {
    error?: { message: string; type: string };
    choices?: { text: string }[];
  };
  return { status: res.status, retryAfter: res.headers.get("retry-after"), body };
}

describe("a completion run the node's own engine fails (test double)", () => {
  it.each([
    // The server's word on the prompt: the client's request is at fault.
    [400, undefined, 400, "invalid_request_error", null],
    [422, undefined, 400, "invalid_request_error", null],
    // The server busy for now: a load answer, with its wait (bounded).
    [429, "7", 503, "server_error", "7"],
    [503, "7", 503, "server_error", "7"],
    [503, "100000", 503, "server_error", "60"],
    // The server failing: the engine's fault.
    [500, undefined, 502, "server_error", null],
  ] as const)(
    "HTTP %i (Retry-After %s): the client gets %i %s",
    async (remote, ra, status, type, retry) => {
      const completions: Completions = { status: remote, asked: 0, ...(ra ? { retryAfter: ra } : {}) };
      const node = keep(
        await startNode(await loopbackNodeSettings({ calibrationMs: 0 }), {
          engine: engineAt(await double(completions)),
        }),
      );
      const a = await complete(node, "Tell me a story about the sea");
      expect(completions.asked).toBe(1);
      expect(a.status).toBe(status);
      expect(a.body.error?.type).toBe(type);
      expect(a.body.error?.message).toMatch(
        new RegExp(`^engine: .*HTTP ${remote}: .*refused with ${remote}`),
      );
      expect(a.body.error?.message.length).toBeLessThanOrEqual(300);
      expect(a.retryAfter).toBe(retry);
      // A streaming client too: the run failed before any output, so the status says it.
      const s = await complete(node, "Tell me a story about the sea", true);
      expect([s.status, s.retryAfter, s.body.error?.type]).toEqual([status, retry, type]);
    },
    30_000,
  );

  it("a server refusing connections: 502", async () => {
    // The local tokenizer: the run itself meets the closed port.
    const url = `http://127.0.0.1:${await freePort("127.0.0.1")}`;
    const node = keep(
      await startNode(await loopbackNodeSettings({ calibrationMs: 0 }), { engine: engineAt(url, "local") }),
    );
    const a = await complete(node, "Tell me a story about the sea");
    expect(a.status).toBe(502);
    expect(a.body.error?.message).toMatch(/^engine: .*ECONNREFUSED/);
    expect(a.retryAfter).toBeNull();
  }, 30_000);
});

describe("a forward whose run the peer's engine fails (test doubles)", () => {
  const prefix = `${"The quick brown fox jumps over the lazy dog. ".repeat(8)}`;

  /** A and B, each before its own double; B has served `prefix`, so A forwards such prompts to B. */
  async function routed(): Promise<{ a: NodeHandle; ofA: Completions; ofB: Completions }> {
    const ofA: Completions = { asked: 0 };
    const ofB: Completions = { asked: 0 };
    const engs = { A: engineAt(await double(ofA)), B: engineAt(await double(ofB)) };
    const { a } = await routedPair(prefix, engs, { onStart: (x, y) => void [keep(x), keep(y)] });
    return { a, ofA, ofB };
  }

  it("B's engine refuses the prompt: A falls back, and its own engine's 400 reaches the client", async () => {
    const { a, ofA, ofB } = await routed();
    ofB.status = 400;
    ofA.status = 400;
    const r = await complete(a, `${prefix} what now?`);
    expect(ofB.asked).toBe(1);
    expect(ofA.asked).toBe(1);
    expect(r.status).toBe(400);
    expect(r.body.error?.type).toBe("invalid_request_error");
    expect(r.body.error?.message).toMatch(/^engine: .*HTTP 400: .*refused with 400/);
  }, 60_000);

  it("B's engine is overloaded: A falls back and answers from its own engine", async () => {
    const { a, ofB } = await routed();
    ofB.status = 503;
    ofB.retryAfter = "7";
    const r = await complete(a, `${prefix} what now?`);
    expect(ofB.asked).toBe(1);
    expect(r.status).toBe(200);
    expect(r.body.choices?.[0]?.text).toBe("ok");
  }, 60_000);
});
