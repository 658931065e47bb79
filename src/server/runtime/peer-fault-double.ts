/**
 * Test double (`--test-peer-fault`, multi-process fault tests only): this node misbehaves toward the
 * peers whose forwards it serves, as a broken or dishonest member would, while its own clients are
 * served normally (so it can be made to hold a prefix its peers then route to it):
 *  - `stall`: acks every forward and never answers it (the stream closes at its TTL);
 *  - `refuse`: answers every forward with an error that is no refusal for load (an HTTP 503);
 *  - `lie`: runs every forward and answers it with the wrong text (`lieAbout`).
 * It wraps the peer server's handlers, so nothing else in the runtime knows it exists.
 */
import type { PeerServerHandlers } from "../../net/peer-handlers.js";
import type { ForwardReplyStream } from "../../net/reply-stream.js";
import type { ReplyMsg } from "../../net/transport-wire.js";
import { retryableError } from "./transport-rules.js";

export const PEER_FAULTS = ["stall", "refuse", "lie"] as const;
export type PeerFault = (typeof PEER_FAULTS)[number];

/** The wrong text a lying peer sends: every word reversed and marked, so no word comes out right. */
export function lieAbout(text: string): string {
  return text.replace(/\S+/g, (w) => `${[...w].reverse().join("")}~`);
}

/** `handlers` as a peer with `fault` serves forwards. */
export function peerFaultDouble(fault: PeerFault, handlers: PeerServerHandlers): PeerServerHandlers {
  return {
    ...handlers,
    onForward(from, msg, stream) {
      switch (fault) {
        case "stall":
          stream.ack();
          return;
        case "refuse":
          stream.finish(retryableError(msg, "peer unavailable: HTTP 503 (test peer fault)"));
          return;
        case "lie":
          handlers.onForward(from, msg, lyingStream(stream));
          return;
      }
    },
  };
}

function lyingStream(stream: ForwardReplyStream): ForwardReplyStream {
  return {
    ack: (epoch) => stream.ack(epoch),
    chunk: (text) => stream.chunk(lieAbout(text)),
    finish(m: ReplyMsg) {
      stream.finish(
        m.type === "result" ? { ...m, result: { ...m.result, text: lieAbout(m.result.text) } } : m,
      );
    },
    get closed() {
      return stream.closed;
    },
  };
}
