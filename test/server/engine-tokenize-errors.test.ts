/**
 * A remote engine whose server fails the node's tokenize or chat-template step: a TEST DOUBLE of an
 * OpenAI-compatible server (127.0.0.1 only, no inference), or no server at all. The client must get
 * the 502 an engine failure gets, with an OpenAI-style body naming the failure, not the 500
 * "internal error" (and error log) of a bug.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { OpenAIEngine } from "../../src/engines/openai/engine.js";
import { freePort } from "../../src/server/cluster/launcher.js";
import { engineMessage } from "../../src/server/runtime/engine-step-errors.js";
import { type NodeHandle, startNode } from "../../src/server/runtime/start-node.js";
import { waitFor } from "../e2e/helpers.js";
import { closedAfterEach, withBody } from "../engines/server-double.js";
import { loopbackNodeSettings } from "./helpers.js";

const live = closedAfterEach<OpenAIEngine>();
let node: NodeHandle | undefined;
afterEach(async () => {
  await node?.stop();
  node = undefined;
});

/**
 * A double answering `/tokenize` and `/apply-template` with `status` and `body` (status 0: never
 * answering them); the rest a 404.
 */
async function failingDouble(status: number, body: string): Promise<string> {
  live.double = createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    req.on("end", () => {
      if (req.url !== "/tokenize" && req.url !== "/apply-template") res.writeHead(404).end();
      else if (status > 0) res.writeHead(status, { "content-type": "application/json" }).end(body);
    });
  });
  await new Promise<void>((r) => live.double!.listen(0, "127.0.0.1", r));
  return `http://127.0.0.1:${(live.double!.address() as AddressInfo).port}`;
}

/** A node on 127.0.0.1 in front of a remote engine at `url`; its logged lines go to `lines`. */
async function nodeFor(url: string, lines: { level: number; msg: string }[]): Promise<NodeHandle> {
  // A short headers timeout: the silent double's case fails fast.
  live.engine = new OpenAIEngine({
    baseUrl: url,
    model: "m",
    retries: 0,
    cacheMirror: "lru",
    headersTimeoutMs: 500,
  });
  const settings = await loopbackNodeSettings({ calibrationMs: 0 });
  const logger = pino(
    { level: "debug" },
    { write: (s: string) => void lines.push(JSON.parse(s) as { level: number; msg: string }) },
  );
  node = await startNode(settings, { logger, engine: live.engine });
  return node;
}

const post = async (url: string, body: unknown) => {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as { error?: { message: string; type: string } } };
};

const PINO_WARN = 40;
const PINO_ERROR = 50;

describe("a remote engine that fails the tokenize step (test double)", () => {
  it.each([
    ["refuses connections", undefined, 0, "", /ECONNREFUSED/],
    ["answers /tokenize with a 500", "server", 500, '{"error":"boom"}', /HTTP 500/],
    ["answers /tokenize with garbage", "server", 200, "<html>not json", /not JSON/],
    ["never answers /tokenize", "server", 0, "", /HEADERS_TIMEOUT|[Tt]imeout/],
  ] as const)(
    "%s: a 502 naming the engine's failure",
    async (_, kind, status, text, why) => {
      let url: string;
      if (kind === "server") url = await failingDouble(status, text);
      else {
        // A port nothing listens on: found free, then left closed.
        url = `http://127.0.0.1:${await freePort("127.0.0.1")}`;
      }
      const lines: { level: number; msg: string }[] = [];
      const n = await nodeFor(url, lines);
      for (const [path, body] of [
        ["/v1/completions", { model: "m", prompt: "Tell me a story", max_tokens: 4 }],
        ["/tokenize", { prompt: "Tell me a story" }],
      ] as const) {
        const a = await post(`${n.apiUrl}${path}`, body);
        expect(a.status, path).toBe(502);
        expect(a.body.error?.type).toBe("server_error");
        expect(a.body.error?.message).toMatch(/^engine: /);
        expect(a.body.error?.message).toMatch(why);
        expect(a.body.error?.message.length).toBeLessThanOrEqual(300);
      }
      // Said at warn (the `request` line of a 5xx), never at error as a bug is.
      const warned = () => lines.filter((l) => l.level === PINO_WARN && l.msg === "request").length;
      // The line is written as the response ends: the client may read it first.
      await waitFor(() => warned() === 2, 10_000, "both requests' warn lines");
      expect(lines.filter((l) => l.level >= PINO_ERROR).map((l) => l.msg)).toEqual([]);
    },
    30_000,
  );

  it("a chat whose template step fails is a 502 too", async () => {
    const lines: { level: number; msg: string }[] = [];
    const n = await nodeFor(await failingDouble(500, "boom"), lines);
    const a = await post(`${n.apiUrl}/v1/chat/completions`, {
      model: "m",
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 4,
    });
    expect(a.status).toBe(502);
    expect(a.body.error?.message).toMatch(/apply-template.*HTTP 500/);
    expect(lines.filter((l) => l.level >= PINO_ERROR).map((l) => l.msg)).toEqual([]);
  }, 30_000);
});

/**
 * A double whose `/tokenize` answers tokens (so its shape is found), except for a prompt holding
 * "BAD": that one it refuses with `status` (and `retry-after: 7`).
 */
async function refusingDouble(status: number): Promise<string> {
  live.double = createServer((req: IncomingMessage, res: ServerResponse) => {
    withBody(req, (body) => {
      const json = { "content-type": "application/json" };
      if (req.url !== "/tokenize") res.writeHead(404).end();
      else if (!body.includes("BAD")) res.writeHead(200, json).end('{"tokens":[1,2,3]}');
      else
        res
          .writeHead(status, { ...json, "retry-after": "7" })
          .end(`{"error":{"message":"refused with ${status}"}}`);
    });
  });
  await new Promise<void>((r) => live.double!.listen(0, "127.0.0.1", r));
  return `http://127.0.0.1:${(live.double!.address() as AddressInfo).port}`;
}

describe("a remote engine whose /tokenize refuses a prompt with a 4xx (test double)", () => {
  it.each([
    // The server's word on the prompt (too long, bad text): the client's request is at fault.
    [400, 400, "invalid_request_error"],
    [413, 400, "invalid_request_error"],
    [422, 400, "invalid_request_error"],
    // The engine's setup (API key, URL, model path): the node's fault, said to the operator.
    [401, 502, "server_error"],
    [403, 502, "server_error"],
    [404, 502, "server_error"],
    [405, 502, "server_error"],
    // The engine busy for now (its rate limit, overload, request timeout): a load answer, retried later.
    [429, 503, "server_error"],
    [503, 503, "server_error"],
    [408, 503, "server_error"],
  ] as const)(
    "HTTP %i: the client gets %i %s, never a 500",
    async (remote, status, type) => {
      const lines: { level: number; msg: string }[] = [];
      const n = await nodeFor(await refusingDouble(remote), lines);
      for (const [path, body] of [
        ["/v1/completions", { model: "m", prompt: "a BAD prompt", max_tokens: 4 }],
        ["/tokenize", { prompt: "a BAD prompt" }],
        ["/v1/chat/completions", { model: "m", messages: [{ role: "user", content: "BAD" }], max_tokens: 4 }],
      ] as const) {
        const res = await fetch(`${n.apiUrl}${path}`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(body),
        });
        const a = (await res.json()) as { error?: { message: string; type: string } };
        expect(res.status, path).toBe(status);
        expect(a.error?.type, path).toBe(type);
        expect(a.error?.message, path).toMatch(
          new RegExp(`^engine: .*HTTP ${remote}: .*refused with ${remote}`),
        );
        expect(a.error?.message.length).toBeLessThanOrEqual(300);
        expect(res.headers.get("retry-after"), path).toBe(status === 503 ? "7" : null);
      }
      if (status === 502) {
        const hinted = lines.filter((l) => l.level === PINO_WARN && /--engine-url/.test(l.msg));
        expect(hinted.length).toBe(1); // once a minute, not per request
      }
      // Written as each response ends: wait for them before reading no error line among them.
      await waitFor(() => lines.filter((l) => l.msg === "request").length === 3, 10_000, "request lines");
      expect(lines.filter((l) => l.level >= PINO_ERROR).map((l) => l.msg)).toEqual([]);
    },
    30_000,
  );
});

describe("engineMessage", () => {
  it("keeps a URL's path only (no host, credentials or query) and bounds the text", () => {
    const m = engineMessage(
      new Error(`POST http://user:secret@h:1/tokenize?key=k2 failed: ${"x".repeat(1000)}`),
    );
    expect(m).not.toMatch(/secret|h:1|k2/);
    expect(m).toMatch(/^engine: POST \/tokenize failed: x+…$/);
    expect(m.length).toBe(300);
    expect(engineMessage(new Error("GET https://10.0.0.5:8000 refused"))).toBe("engine: GET / refused");
  });
});
