/**
 * Time bounds on a server's connections, so a client that opens a socket and then sends nothing, or
 * sends its request a byte at a time (slow loris), gives its place back after a bounded time:
 *   - idle: a connection that has sent no byte at all is closed after `idleMs`;
 *   - headers: a request's headers must be complete within `headersMs` of the connection opening (or
 *     of the request starting, on a kept-alive connection): Node's `headersTimeout`, answered 408;
 *   - request: the whole request, body included, within `requestMs` (Node's `requestTimeout`; the
 *     response may take as long as it needs);
 *   - keep-alive: an idle kept-alive connection is closed after `keepAliveMs`;
 *   - TLS: the handshake must finish within `headersMs` (pass `tlsHandshakeTimeout` at creation).
 */
import type { Server } from "node:http";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import { answerClientError } from "./framework-answers.js";

export interface ConnectionTimeouts {
  idleMs: number;
  headersMs: number;
  /** At least `headersMs` (Node requires it). */
  requestMs: number;
  keepAliveMs: number;
}

/** Why the server closed a connection before it finished a request. */
export type TimeoutReason = "idle" | "timeout";

/** The `handshakeTimeout` for a TLS server's creation options (Node takes it only there). */
export function tlsHandshakeTimeout(t: ConnectionTimeouts): { handshakeTimeout: number } {
  return { handshakeTimeout: t.headersMs };
}

/**
 * Sets `server`'s HTTP timeouts (before it listens: Node starts its checker then) and returns the idle
 * watch to run on each accepted raw socket.
 */
export function applyConnectionTimeouts(
  server: Server,
  t: ConnectionTimeouts,
  onClosed?: (reason: TimeoutReason) => void,
): (socket: Socket) => void {
  if (server.listening) throw new Error("connection timeouts must be set before the server listens");
  for (const [k, v] of Object.entries(t))
    if (!(Number.isFinite(v) && v > 0)) throw new RangeError(`${k} must be a positive number of ms`);
  server.headersTimeout = t.headersMs;
  server.requestTimeout = Math.max(t.requestMs, t.headersMs);
  server.keepAliveTimeout = t.keepAliveMs;
  // Node checks headers and request deadlines on this period (30 s by default, which would let a
  // slow client keep its place up to 30 s past its deadline).
  // (A creation option in the types; Node reads the property when the server starts listening.)
  (server as Server & { connectionsCheckingInterval: number }).connectionsCheckingInterval = Math.min(
    1000,
    Math.max(50, Math.floor(t.headersMs / 10)),
  );
  server.on("clientError", (err: NodeJS.ErrnoException, socket: Duplex) => {
    const timedOut = err.code === "ERR_HTTP_REQUEST_TIMEOUT";
    if (timedOut) onClosed?.("timeout");
    // A listener replaces Node's own answer: give it when no other listener (fastify's) does.
    if (server.listenerCount("clientError") > 1) return;
    answerClientError(err, socket, (error) => ({ error }));
  });
  server.on("tlsClientError", (err: NodeJS.ErrnoException) => {
    if (err.code === "ERR_TLS_HANDSHAKE_TIMEOUT") onClosed?.("timeout");
  });
  return (socket) => {
    const timer = setTimeout(() => {
      if (socket.bytesRead > 0 || socket.destroyed) return;
      onClosed?.("idle");
      socket.destroy();
    }, t.idleMs);
    timer.unref();
    socket.once("close", () => clearTimeout(timer));
  };
}
