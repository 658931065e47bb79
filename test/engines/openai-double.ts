/**
 * A TEST DOUBLE of an OpenAI-compatible server for the remote engine's protocol-edge tests, scripted
 * by each test (127.0.0.1 only): it replays canned responses shaped as the real servers answer
 * (llama.cpp's server, vLLM) and does no inference.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { OpenAIEngine } from "../../src/engines/openai/engine.js";
import type { OpenAIEngineOptions } from "../../src/engines/openai/options.js";
import { closedAfterEach, type EngineAndDouble } from "./server-double.js";

export type Handler = (req: IncomingMessage, body: string, res: ServerResponse) => void;
export interface Seen {
  method: string;
  url: string;
  body: string;
  auth?: string;
}

/** Starts the test double; `routes` maps "METHOD /path" to a handler or a queue of handlers. */
export type StartDouble = (
  routes: Record<string, Handler | Handler[]>,
) => Promise<{ url: string; seen: Seen[] }>;

/**
 * The engine and double a test file's tests set, closed after each test, and the double's starter.
 * Call it at a test file's top level: it registers that file's afterEach.
 */
export function scriptedDouble(): { live: EngineAndDouble<OpenAIEngine>; startDouble: StartDouble } {
  const live = closedAfterEach<OpenAIEngine>();
  const startDouble: StartDouble = async (routes) => {
    const seen: Seen[] = [];
    live.double = createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        seen.push({ method: req.method!, url: req.url!, body, auth: req.headers.authorization });
        const r = routes[`${req.method} ${req.url}`];
        const h = Array.isArray(r) ? (r.length > 1 ? r.shift() : r[0]) : r;
        if (!h) {
          res.writeHead(404, { "content-type": "application/json" }).end('{"error":"not found"}');
          return;
        }
        h(req, body, res);
      });
    });
    await new Promise<void>((r) => live.double!.listen(0, "127.0.0.1", r));
    return { url: `http://127.0.0.1:${(live.double!.address() as AddressInfo).port}`, seen };
  };
  return { live, startDouble };
}

export const json =
  (status: number, obj: unknown, headers: Record<string, string> = {}): Handler =>
  (_q, _b, res) =>
    res.writeHead(status, { "content-type": "application/json", ...headers }).end(JSON.stringify(obj));

export const sse =
  (events: unknown[]): Handler =>
  (_q, _b, res) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    for (const e of events) res.write(`data: ${typeof e === "string" ? e : JSON.stringify(e)}\n\n`);
    res.end("data: [DONE]\n\n");
  };

export const opts = (url: string, extra: Partial<OpenAIEngineOptions> = {}): OpenAIEngineOptions => ({
  baseUrl: url,
  model: "m",
  backoffMs: 5,
  maxBackoffMs: 2000,
  ...extra,
});

export const tokenReq = (prompt: string, maxTokens = 4) => ({
  id: "r",
  tokens: Uint32Array.from([1, 2, 3]),
  prompt,
  maxTokens,
});
