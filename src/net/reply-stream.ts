/**
 * The answer stream of a forward we serve, over either carrier (a channel stream or an HTTP
 * response): what both share — ordered delivery under delay injection, the deferred ack, and nothing
 * written after the final record or once the origin is gone — lives here once.
 */
import type { ReplyMsg } from "./transport-wire.js";

/** Where the node writes the answer to a forwarded request: chunks, then exactly one final message. */
export interface ForwardReplyStream {
  /**
   * The node accepted the forward (`forward-ack`). Sent only if no chunk or answer leaves within
   * ACK_DEFER_MS (those imply it at the origin): a quick answer costs no extra message.
   */
  ack(): void;
  chunk(text: string): void;
  finish(msg: ReplyMsg): void;
  /** True once finished or once the origin hung up. */
  readonly closed: boolean;
}

/** How one carrier writes a forward's records; each is called at most in the order the node made them. */
export interface ReplyCarrier {
  ack(): void;
  chunk(text: string): void;
  final(msg: ReplyMsg): void;
  /** The origin hung up: nothing more can reach it. */
  gone(): boolean;
}

/** Far below the origin's ack timeout (≥ 250 ms), far above a quick answer's time on a LAN. */
const ACK_DEFER_MS = 10;

export function replyStream(
  delay: (() => Promise<void>) | undefined,
  carrier: ReplyCarrier,
): ForwardReplyStream {
  const write = orderedWrites(delay);
  let finished = false;
  const acker = deferredAck(() => write(carrier.ack));
  return {
    ack: acker.ack,
    chunk(text) {
      acker.answered();
      if (!finished && !carrier.gone()) write(() => carrier.chunk(text));
    },
    finish(m) {
      acker.answered();
      if (finished || carrier.gone()) return;
      finished = true;
      write(() => carrier.final(m));
    },
    get closed() {
      return finished || carrier.gone();
    },
  };
}

/**
 * The answer direction of a forward under delay injection (the paper's Δcomm): the whole answer waits
 * one injected delay, then its records leave in order. Without a delay (or once it is over and the
 * queue has drained) a record is written at once, with no promise hop on the hot path.
 */
function orderedWrites(delay: (() => Promise<void>) | undefined): (write: () => void) => void {
  let queue: Promise<void> | undefined = delay?.();
  let queued = 0;
  return (write) => {
    if (!queue) return write();
    queued++;
    const q = queue.then(() => {
      write();
      if (--queued === 0 && queue === q) queue = undefined;
    });
    queue = q;
  };
}

/**
 * An ack that leaves ACK_DEFER_MS after `ack()` unless the answer starts first (`answered()`): acks
 * bound how long an origin waits on a lost forward, but a quick answer should not pay a message for one.
 */
function deferredAck(sendAck: () => void): { ack(): void; answered(): void } {
  let timer: NodeJS.Timeout | undefined;
  let done = false;
  return {
    ack() {
      if (done || timer) return;
      timer = setTimeout(() => {
        done = true;
        sendAck();
      }, ACK_DEFER_MS);
      timer.unref();
    },
    answered() {
      done = true;
      if (timer) clearTimeout(timer);
    },
  };
}
