/**
 * Closing a port whose last answers are still being written. When the drain deadline passes, the
 * clients still waiting are failed with a 503, which fastify writes a few event-loop turns later;
 * cutting every connection at once would lose those answers and leave the clients with nothing.
 */
import type { Server } from "node:http";
import type { OwedAnswers } from "../../net/owed-answers.js";
import { noteServerCut } from "../../net/server-cuts.js";
import { raceTimeout } from "../../net/time-bound.js";

/** How long the last answers get to reach their clients: writing one takes far less, even under load. */
export const ANSWER_GRACE_MS = 2_000;

/**
 * Waits up to `graceMs` for `closed` (the server's close, which ends once every connection has), then
 * drops the connections left — a stalled client would otherwise hold the close open — and awaits it.
 * With `answers` (the server's tracked connections), those owing no answer are cut at once, the
 * others as their answers are out; without, Node's idle cut (which takes an ended answer for done).
 */
export async function closeWithGrace(
  server: Server,
  closed: Promise<void>,
  graceMs: number,
  answers?: OwedAnswers,
): Promise<void> {
  if (answers) answers.cutUnowed();
  else server.closeIdleConnections();
  await raceTimeout(closed, graceMs, () => undefined);
  // The answers still owed are cut by the node's shutdown: its 503, not a client gone, in the request log.
  noteServerCut(server, 503);
  server.closeAllConnections();
  await closed;
}
