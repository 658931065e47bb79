/** A client request's hang-up as a signal, for the engine calls made on its behalf before it is served. */
import type { ServerResponse } from "node:http";

/**
 * Aborted when the client of `res` hangs up before its answer is sent: its chat template or tokenize
 * at the engine ends then (a remote one's request is cancelled), not when the engine answers it. The
 * listener is on the request's own response, not on its connection, which keep-alive reuses.
 */
export function hangUpSignal(res: ServerResponse): AbortSignal {
  const gone = new AbortController();
  const closed = () => {
    if (!res.writableFinished) gone.abort();
  };
  // Closed already (a hang-up before the handler got here): no `close` event is coming.
  if (res.closed) closed();
  else res.once("close", closed);
  return gone.signal;
}
