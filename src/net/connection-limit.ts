/**
 * A bound on a server's open connections. Every socket a client or peer opens costs a file descriptor
 * and buffers whether or not it ever sends a request, so their number is capped like every other size
 * the far side controls. Over the cap, a plain-HTTP server answers the new connection with a 503 and a
 * JSON error (the client learns why and when to retry) and closes it; a TLS server closes it before
 * the handshake (there is no channel yet to say anything on) — Node's own `maxConnections` does that.
 */
import { type Server, STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";

/**
 * A whole HTTP/1.1 response written straight to a socket that never reaches a request handler (a
 * refused connection or upgrade), with a JSON body; the connection then closes.
 */
export function rawJsonResponse(status: number, json: object, headers: Record<string, string> = {}): string {
  const body = JSON.stringify(json);
  const extra = Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join("");
  return `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ""}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${extra}Connection: close\r\n\r\n${body}`;
}

export function limitConnections(
  server: Server,
  max: number,
  opts: {
    tls?: boolean;
    onRefused?: () => void;
    /** The 503's JSON body for a plain-HTTP refusal, in the port's own error format. */
    body?: (message: string) => object;
  } = {},
): void {
  if (opts.tls) {
    server.maxConnections = max;
    server.on("drop", () => opts.onRefused?.());
    return;
  }
  let open = 0;
  // The server's own `connection` listener (the HTTP parser) runs only for admitted sockets: a refused
  // one never gets a parser, so nothing it sends can reach a handler.
  const admitted = server.listeners("connection") as ((socket: Duplex) => void)[];
  server.removeAllListeners("connection");
  server.on("connection", (socket: Duplex) => {
    if (open >= max) {
      opts.onRefused?.();
      socket.on("error", () => {}); // a client resetting a refused socket is not our error
      // Read and drop whatever the client sends (else its close is never seen and the server cannot
      // finish closing), answer, and do not wait on a client that never hangs up.
      socket.resume();
      const message = `too many open connections (limit ${max}); retry shortly`;
      socket.end(rawJsonResponse(503, opts.body?.(message) ?? { error: message }, { "Retry-After": "1" }));
      setTimeout(() => socket.destroy(), 1000).unref();
      return;
    }
    open++;
    socket.once("close", () => {
      open--;
    });
    for (const listener of admitted) listener.call(server, socket);
  });
}
