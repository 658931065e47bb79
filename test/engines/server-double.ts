/** Shared by the engine tests that stand up an HTTP test double of a server (127.0.0.1 only). */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach } from "vitest";

/** Closes the double and every connection still open to it (nothing when there is none). */
export async function closeDouble(server: Server | undefined): Promise<void> {
  server?.closeAllConnections();
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
}

/** Calls `fn` with the request's whole body (UTF-8) once it has arrived. */
export function withBody(req: IncomingMessage, fn: (body: string) => void): void {
  let body = "";
  req.setEncoding("utf8");
  req.on("data", (c: string) => {
    body += c;
  });
  req.on("end", () => fn(body));
}

/** A test's engine and the test double it talks to, set by the test. */
export interface EngineAndDouble<E extends { close(): Promise<void> }> {
  engine: E | undefined;
  double: Server | undefined;
}

/**
 * The engine and double a test file's tests set, closed after each test (the engine first: its
 * requests end before the double's connections are cut) and cleared, so no test sees another's.
 */
export function closedAfterEach<E extends { close(): Promise<void> }>(): EngineAndDouble<E> {
  const live: EngineAndDouble<E> = { engine: undefined, double: undefined };
  afterEach(async () => {
    await live.engine?.close();
    live.engine = undefined;
    await closeDouble(live.double);
    live.double = undefined;
  });
  return live;
}

/**
 * A double of an OpenAI-compatible server that stalls, set as `live.double`: `/tokenize` in llama.cpp's
 * shape answers its shape probe ("Hello, world") at once and holds every other request;
 * `/v1/completions` holds every request; any other path is held too, or answered 404 when `others` is
 * "404". `held` lists the paths of held requests, `closed` those whose client hung up (the abort
 * reached the socket).
 */
export async function stallingDouble(
  live: { double: Server | undefined },
  others: "held" | "404" = "held",
): Promise<{ url: string; held: string[]; closed: string[] }> {
  const held: string[] = [];
  const closed: string[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      if (req.url === "/tokenize") {
        const content = (JSON.parse(body) as { content?: unknown }).content;
        if (content === undefined || content === "Hello, world") {
          const tokens = typeof content === "string" ? Array.from(content, (_, i) => i + 1) : [];
          res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ tokens }));
          return;
        }
      } else if (req.url !== "/v1/completions" && others === "404") {
        res.writeHead(404).end();
        return;
      }
      held.push(req.url ?? "");
      res.on("close", () => closed.push(req.url ?? ""));
    });
  });
  live.double = server;
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, held, closed };
}
