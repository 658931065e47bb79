/**
 * The answer stream of a forward we serve, over either carrier (a channel stream or an HTTP
 * response): what both share — ordered delivery under delay injection, an ack only while it still
 * says something, and nothing written after the final record or once the origin is gone — lives here
 * once. (The node itself holds the ack back and drops it when the answer leaves first: ackDeferMs.)
 */
import type { ReplyMsg } from "./transport-wire.js";

/** Where the node writes the answer to a forwarded request: chunks, then exactly one final message. */
export interface ForwardReplyStream {
  /**
   * The node accepted the forward (`forward-ack`, in its `epoch`); dropped once a chunk has left (it
   * implies one, without an epoch).
   */
  ack(epoch?: number): void;
  chunk(text: string): void;
  finish(msg: ReplyMsg): void;
  /** True once finished or once the origin hung up. */
  readonly closed: boolean;
}

/** How one carrier writes a forward's records; each is called at most in the order the node made them. */
export interface ReplyCarrier {
  ack(epoch?: number): void;
  chunk(text: string): void;
  final(msg: ReplyMsg): void;
  /** The origin hung up: nothing more can reach it. */
  gone(): boolean;
}

export function replyStream(
  delay: (() => Promise<void>) | undefined,
  carrier: ReplyCarrier,
): ForwardReplyStream {
  // Without injected delay (the daemon's normal case) records go straight to the carrier: no queue,
  // and no closure per chunk.
  const out = delay ? delayedCarrier(delay, carrier) : carrier;
  let finished = false;
  /** A record has left: the origin counts the first one as the ack. */
  let spoke = false;
  return {
    ack(epoch) {
      if (spoke || finished || carrier.gone()) return;
      spoke = true;
      out.ack(epoch);
    },
    chunk(text) {
      if (finished || carrier.gone()) return;
      spoke = true;
      out.chunk(text);
    },
    finish(m) {
      if (finished || carrier.gone()) return;
      finished = true;
      out.final(m);
    },
    get closed() {
      return finished || carrier.gone();
    },
  };
}

/**
 * `carrier` under delay injection (the paper's Δcomm): the whole answer waits one injected delay,
 * then its records leave in order. Once it is over and the queue has drained, a record is written at
 * once, with no promise hop.
 */
function delayedCarrier(delay: () => Promise<void>, carrier: ReplyCarrier): ReplyCarrier {
  let queue: Promise<void> | undefined = delay();
  let queued = 0;
  const write = (w: () => void): void => {
    if (!queue) {
      w();
      return;
    }
    queued++;
    const q = queue.then(() => {
      w();
      if (--queued === 0 && queue === q) queue = undefined;
    });
    queue = q;
  };
  return {
    ack: (epoch) => write(() => carrier.ack(epoch)),
    chunk: (text) => write(() => carrier.chunk(text)),
    final: (m) => write(() => carrier.final(m)),
    gone: carrier.gone,
  };
}
