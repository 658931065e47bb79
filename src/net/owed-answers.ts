/**
 * Which of a server's connections still owe their client an answer. Node's `closeIdleConnections` cuts
 * only kept-alive connections between requests: one that has sent no byte yet, or part of a request's
 * headers (a slow loris), counts as busy and holds the server's close open for the whole answer grace
 * of a stop, though no answer is owed on it. Yet it counts an answer as done once ended, not once
 * written out, and cuts a slow reader's large answer short, with any request pipelined behind it; and
 * `server.close()` runs that cut itself as a stop begins (fastify's `forceCloseConnections` cannot turn
 * it off). A tracked server makes no such cut: at the close this tracker cuts every connection that
 * owes nothing, and each of the others once its last answer is out.
 */
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { Socket } from "node:net";

export interface OwedAnswers {
  /** Tracks an admitted connection (its raw socket), before the server's own handlers see it. */
  admit(socket: Socket): void;
  /**
   * Cuts every connection with no request in flight, and from now on each other one as its last
   * answer is out: what is left of a close is the answers owed.
   */
  cutUnowed(): void;
}

export function trackOwedAnswers(server: Server): OwedAnswers {
  /** Open admitted connections → their requests whose answers are not finished. */
  const inFlight = new Map<Socket, number>();
  let closing = false;
  // Node's close() calls this on the instance; the drain then answers what kept-alive clients send.
  server.closeIdleConnections = () => {};
  server.on("request", (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket as Socket;
    const n = inFlight.get(socket);
    if (n === undefined) return;
    inFlight.set(socket, n + 1);
    // `close` follows `finish` (the answer written out to the socket) or a connection lost first.
    res.once("close", () => {
      const left = inFlight.get(socket);
      if (left === undefined) return;
      inFlight.set(socket, left - 1);
      // Kept alive or not, the connection would only hold the close open for the rest of the grace.
      if (closing && left === 1) socket.destroySoon();
    });
  });
  return {
    admit(socket) {
      inFlight.set(socket, 0);
      socket.once("close", () => inFlight.delete(socket));
    },
    cutUnowed() {
      closing = true;
      for (const [socket, n] of inFlight) if (n === 0) socket.destroy();
    },
  };
}
