/**
 * Requests a server cut itself before their response's headers went out — one whose body Node could not
 * read, refused raw on its socket, or every request still open as the port closes — with the status it
 * meant: a request log then says that status, not the 499 of a client that went away. Keyed by the
 * request, not its connection: a kept-alive connection carries others the refusal was not meant for.
 */
import type { IncomingMessage, Server } from "node:http";

const cuts = new WeakMap<object, number>();

/** `at` (one request, or every request of a server from now on) is cut by us, meaning `status`. */
export function noteServerCut(at: Server | object, status: number): void {
  cuts.set(at, status);
}

/** The status meant by a cut of `req` (on `server`) that the server made, if it made one. */
export function serverCutStatus(server: Server, req: IncomingMessage): number | undefined {
  return cuts.get(req) ?? cuts.get(server);
}
