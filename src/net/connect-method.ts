/**
 * `CONNECT` (a request for a proxy tunnel) on a port that is no proxy. Node hands it to the server's
 * `connect` listeners and, with none, drops the connection unanswered; a client then cannot tell a
 * refusal from a crash. Answered 405 with a JSON error instead, like any method a route does not take.
 */
import type { Server } from "node:http";
import type { Duplex } from "node:stream";
import { rawJsonResponse } from "./connection-limit.js";

/** How long a refused connection may stay half-closed before it is cut off. */
const LINGER_MS = 1000;

export const CONNECT_REFUSAL = "CONNECT is not allowed: this port is not a proxy";

/** Answers every CONNECT on `server` 405 with the JSON `body` made from the refusal's message. */
export function refuseConnect(server: Server, body: (message: string) => object): void {
  server.on("connect", (_req: unknown, socket: Duplex) => {
    socket.on("error", () => {}); // a client gone before the answer is not our error
    socket.end(rawJsonResponse(405, body(CONNECT_REFUSAL)));
    setTimeout(() => socket.destroy(), LINGER_MS).unref();
  });
}
