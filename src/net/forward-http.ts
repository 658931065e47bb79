/**
 * A forward over HTTP (transport-client.ts; by default forwards travel on the forward channel): one
 * request each, its answer streamed as NDJSON records, the head and each record checked against the
 * request's response MAC, one timer for the whole forward.
 */
import type { Pool } from "undici";
import { UNAUTHENTICATED } from "./answer-check.js";
import { readBoundedBytes, readForwardStream } from "./answer-stream.js";
import { forwardTimeouts } from "./forward-timeouts.js";
import { forwardToWire, parseEpoch } from "./forward-wire.js";
import type { PeerAuth } from "./transport-auth.js";
import { classify, TransportError } from "./transport-error.js";
import type { TransportTimeouts } from "./transport-timeouts.js";
import { FORWARD_PATH, type ForwardMsg, type ReplyMsg } from "./transport-wire.js";

/**
 * Sends `msg` to `id` (signed for `to`) on its own request and streams the answer: `onChunk` for each
 * output piece, `onAck` on the response head. `pool`: the peer's pool, taken once the request is signed.
 */
export async function forwardOverHttp(
  auth: PeerAuth,
  timeouts: TransportTimeouts,
  id: string,
  to: string,
  pool: () => Pool,
  msg: ForwardMsg,
  onChunk: (text: string) => void,
  onAck: ((epoch?: number) => void) | undefined,
  withText: boolean,
): Promise<ReplyMsg> {
  const body = Buffer.from(JSON.stringify(forwardToWire(msg, withText)));
  const path = FORWARD_PATH;
  const t = forwardTimeouts(timeouts, msg.deadlineMs);
  // One controller and one timer, cleared when the answer is in: unlike AbortSignal.timeout's, no
  // timer outlives its request.
  const ac = new AbortController();
  const timer = setTimeout(
    () => ac.abort(new DOMException(`forward to ${id} took over ${t.forwardTotalMs} ms`, "TimeoutError")),
    t.forwardTotalMs,
  );
  timer.unref?.();
  try {
    const headers = auth.sign({
      method: "POST",
      path,
      body,
      to,
      headers: { "content-type": "application/json" },
    });
    const opener = auth.responseOpener(headers);
    const res = await pool().request({
      method: "POST",
      path,
      body,
      signal: ac.signal,
      headersTimeout: t.firstByteMs,
      bodyTimeout: t.gapMs,
      headers,
    });
    if (res.statusCode !== 200) {
      const bytes = await readBoundedBytes(res.body, 4096);
      // A refusal is the peer's only if it is sealed as its answer to this request.
      const authentic = !opener || opener.head(res.statusCode, res.headers, bytes);
      throw new TransportError(
        "http",
        `peer ${id} refused forward: ${res.statusCode} ${bytes.toString("utf8")}${authentic ? "" : UNAUTHENTICATED}`,
        res.statusCode,
        !authentic,
      );
    }
    // The head (the ack and its epoch) first; each record's tag as it is read.
    if (opener && !opener.head(res.statusCode, res.headers)) {
      // Not this request's answer: nothing more of this connection is read.
      res.body.on("error", () => {}).destroy();
      throw new TransportError(
        "protocol",
        `peer ${id}: forward answer fails its response MAC`,
        undefined,
        true,
      );
    }
    onAck?.(parseEpoch(res.headers));
    return await readForwardStream(id, res.body, onChunk, opener);
  } catch (err) {
    throw classify(err);
  } finally {
    clearTimeout(timer);
  }
}
