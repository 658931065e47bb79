/**
 * Connections a server cut itself before a response's headers went out — a refusal written raw to the
 * socket, or every connection dropped as the port closes — with the status it meant: a request log
 * then says that status, not the 499 of a client that went away.
 */
import type { Server } from "node:http";
import type { Duplex } from "node:stream";

const cuts = new WeakMap<object, number>();

/** `at` (one connection, or every connection of a server from now on) is cut by us, meaning `status`. */
export function noteServerCut(at: Server | Duplex, status: number): void {
  cuts.set(at, status);
}

/** The status meant by a cut of `socket` (on `server`) that the server made, if it made one. */
export function serverCutStatus(server: Server, socket: Duplex | null | undefined): number | undefined {
  return (socket ? cuts.get(socket) : undefined) ?? cuts.get(server);
}
