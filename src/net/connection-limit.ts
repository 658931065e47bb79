/**
 * Bounds on a server's open connections. Every socket a client or peer opens costs a file descriptor
 * and buffers whether or not it ever sends a request, so their number is capped like every other size
 * the far side controls: in total, and per client address (client-address.ts) so that one client
 * cannot take every place and lock the others out. A connection marked trusted (on the peer port:
 * one that carried a member's authenticated request) stops counting against its address, so peers
 * behind one NAT address are bounded by the total only.
 *
 * Over a bound, a plain-HTTP server answers the new connection with a JSON error (503 over the total,
 * 429 over the address's share: the client learns why and when to retry) and closes it; a TLS server
 * closes it before the handshake (there is no channel yet to say anything on).
 */
import { type Server, STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import { clientAddressKey } from "./client-address.js";
import { methodInPacket } from "./request-line.js";

/**
 * A whole HTTP/1.1 response written straight to a socket that never reaches a request handler (a
 * refused connection or upgrade), with a JSON body; the connection then closes. The answer to a HEAD
 * request (`head`) keeps the body's Content-Length but not its bytes: HTTP forbids a body there, and a
 * keep-alive client would read one as the start of the next response.
 */
export function rawJsonResponse(
  status: number,
  json: object,
  headers: Record<string, string> = {},
  head = false,
): string {
  const body = JSON.stringify(json);
  const extra = Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join("");
  return `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ""}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${extra}Connection: close\r\n\r\n${head ? "" : body}`;
}

export interface ConnectionLimits {
  /** Connections open at once on the port. */
  max: number;
  /** Of them from one client address (trusted connections do not count here). */
  perAddress: number;
}

/** Why a connection was refused as it opened. */
export type RefusalReason = "limit" | "per-address";

export interface LimitOptions {
  tls?: boolean;
  onRefused?: (reason: RefusalReason) => void;
  /** Runs for each admitted connection (the raw socket), before the server's own handlers. */
  onAdmitted?: (socket: Socket) => void;
  /** The refusal's JSON body for a plain-HTTP refusal, in the port's own error format. */
  body?: (message: string) => object;
}

export interface ConnectionLimiter {
  /**
   * Stops counting `socket`'s connection against its address (it keeps counting in the total). Takes
   * the raw socket or the TLS socket over it.
   */
  trust(socket: { remoteAddress?: string | undefined; remotePort?: number | undefined }): void;
  /** Open connections, and how many of them count against some address. */
  stats(): { open: number; perAddress: number; addresses: number };
}

interface Entry {
  address: string;
  trusted: boolean;
}

/** How long a refusal waits for the request's first bytes (to see its method) before answering anyway. */
const REFUSED_ANSWER_WAIT_MS = 200;
/** How long a refused connection may linger (reading and dropping) before it is destroyed. */
export const REFUSED_LINGER_MS = 1000;

const socketKey = (s: { remoteAddress?: string | undefined; remotePort?: number | undefined }) =>
  `${s.remoteAddress}|${s.remotePort}`;

export function limitConnections(
  server: Server,
  limits: ConnectionLimits,
  opts: LimitOptions = {},
): ConnectionLimiter {
  const { max } = limits;
  const perAddress = Math.min(limits.perAddress, max);
  if (!(Number.isInteger(max) && max >= 1 && Number.isInteger(perAddress) && perAddress >= 1))
    throw new RangeError("connection limits must be positive integers");
  /** Open connections by remote address and port (the raw socket's; a TLS socket reports the same). */
  const open = new Map<string, Entry>();
  let total = 0;
  /** Untrusted open connections per client address; no zero entries. */
  const byAddress = new Map<string, number>();
  let counted = 0;

  const release = (e: Entry) => {
    if (e.trusted) return;
    e.trusted = true;
    counted--;
    const n = (byAddress.get(e.address) ?? 1) - 1;
    if (n > 0) byAddress.set(e.address, n);
    else byAddress.delete(e.address);
  };

  /** How to cut each refused plain-HTTP connection still open. */
  const lingering = new Set<() => void>();
  const close = server.close;
  server.close = function (this: Server, ...args: Parameters<Server["close"]>) {
    for (const cut of lingering) cut();
    return close.apply(this, args);
  };

  const refuse = (socket: Socket, reason: RefusalReason, status: number, message: string) => {
    opts.onRefused?.(reason);
    socket.on("error", () => {}); // a client resetting a refused socket is not our error
    if (opts.tls) {
      socket.destroy();
      return;
    }
    // Read and drop whatever the client sends (else its close is never seen and the server cannot
    // finish closing), answer, and do not wait on a client that never hangs up. The answer waits
    // briefly for the request's first bytes: a HEAD request's answer has no body.
    let answered = false;
    const answer = (head: boolean) => {
      if (answered) return;
      answered = true;
      const body = opts.body?.(message) ?? { error: message };
      socket.end(rawJsonResponse(status, body, { "Retry-After": "1" }, head));
    };
    socket.once("data", (chunk: Buffer) => answer(methodInPacket(chunk) === "HEAD"));
    socket.resume();
    setTimeout(() => answer(false), REFUSED_ANSWER_WAIT_MS).unref();
    setTimeout(() => socket.destroy(), REFUSED_LINGER_MS).unref();
    // The server's close waits for every socket it accepted, this one too: a closing server answers it
    // now and closes it once the answer is out, not waiting on the client's hang-up.
    const cut = () => {
      answer(false);
      socket.destroySoon();
    };
    lingering.add(cut);
    socket.once("close", () => lingering.delete(cut));
  };

  // The server's own `connection` listener (the HTTP parser, or TLS) runs only for admitted sockets: a
  // refused one never gets a parser, so nothing it sends can reach a handler.
  const admitted = server.listeners("connection") as ((socket: Duplex) => void)[];
  server.removeAllListeners("connection");
  server.on("connection", (socket: Socket) => {
    if (total >= max) {
      refuse(socket, "limit", 503, `too many open connections (limit ${max}); retry shortly`);
      return;
    }
    const address = clientAddressKey(socket.remoteAddress);
    const mine = byAddress.get(address) ?? 0;
    if (mine >= perAddress) {
      refuse(
        socket,
        "per-address",
        429,
        `too many open connections from your address (limit ${perAddress}); retry shortly`,
      );
      return;
    }
    const key = socketKey(socket);
    const entry: Entry = { address, trusted: false };
    open.set(key, entry);
    byAddress.set(address, mine + 1);
    counted++;
    total++;
    socket.once("close", () => {
      total--;
      release(entry);
      if (open.get(key) === entry) open.delete(key);
    });
    opts.onAdmitted?.(socket);
    for (const listener of admitted) listener.call(server, socket);
  });

  return {
    trust(socket) {
      const e = open.get(socketKey(socket));
      if (e) release(e);
    },
    stats: () => ({ open: total, perAddress: counted, addresses: byAddress.size }),
  };
}
