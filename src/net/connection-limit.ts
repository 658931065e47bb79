/**
 * A bound on a server's open connections. Every socket a client or peer opens costs a file descriptor
 * and buffers whether or not it ever sends a request, so their number is capped like every other size
 * the far side controls. Over the cap, a plain-HTTP server answers the new connection with a 503 and a
 * JSON error (the client learns why and when to retry) and closes it; a TLS server closes it before
 * the handshake (there is no channel yet to say anything on).
 */
import type { Server } from "node:http";
import type { Socket } from "node:net";

export interface ConnectionLimit {
  /** Connections open now. */
  readonly open: number;
  /** Connections refused at the cap so far. */
  readonly refused: number;
}

export function limitConnections(
  server: Server,
  max: number,
  opts: { tls?: boolean; onRefused?: () => void } = {},
): ConnectionLimit {
  const state = { open: 0, refused: 0 };
  // The server's own `connection` listeners (the HTTP parser, or the TLS handshake) run only for
  // admitted sockets: a refused one never gets a parser, so nothing it sends can reach a handler.
  const admitted = server.listeners("connection") as ((socket: Socket) => void)[];
  server.removeAllListeners("connection");
  server.on("connection", (socket: Socket) => {
    if (state.open >= max) {
      state.refused++;
      opts.onRefused?.();
      socket.on("error", () => {}); // a client resetting a refused socket is not our error
      if (opts.tls) {
        socket.destroy();
        return;
      }
      // Read and drop whatever the client sends (else its close is never seen and the server cannot
      // finish closing), answer, and do not wait on a client that never hangs up.
      socket.resume();
      socket.end(refusal(max));
      setTimeout(() => socket.destroy(), 1000).unref();
      return;
    }
    state.open++;
    socket.once("close", () => {
      state.open--;
    });
    for (const listener of admitted) listener.call(server, socket);
  });
  return state;
}

function refusal(max: number): string {
  const body = JSON.stringify({
    error: {
      message: `too many open connections (limit ${max}); retry shortly`,
      type: "server_error",
      param: null,
      code: "too_many_connections",
    },
  });
  return `HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n${body}`;
}
