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
  // Without injected delay (the daemon's normal case) records go straight to the carrier: no queue,
  // and no closure per chunk.
  const out = delay ? delayedCarrier(delay, carrier) : carrier;
  let finished = false;
  const acker = deferredAck(out.ack);
  return {
    ack: acker.ack,
    chunk(text) {
      acker.answered();
      if (finished || carrier.gone()) return;
      out.chunk(text);
    },
    finish(m) {
      acker.answered();
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
    ack: () => write(carrier.ack),
    chunk: (text) => write(() => carrier.chunk(text)),
    final: (m) => write(() => carrier.final(m)),
    gone: carrier.gone,
  };
}

/**
 * Acks waiting to leave: each is sent ACK_DEFER_MS (or up to twice that) after `ack()` unless its
 * answer starts first (`answered()`). One shared timer for all of them, armed only while some wait:
 * a timer per forward was allocated, and nearly always cleared, on every forward served.
 */
const waitingAcks = new Set<{ due: number; send(): void }>();
let ackTimer: NodeJS.Timeout | undefined;

function flushAcks(): void {
  ackTimer = undefined;
  const now = performance.now();
  for (const a of waitingAcks) {
    if (a.due > now) continue;
    waitingAcks.delete(a);
    a.send();
  }
  if (waitingAcks.size > 0) armAckTimer();
}

function armAckTimer(): void {
  ackTimer ??= setTimeout(flushAcks, ACK_DEFER_MS);
  ackTimer.unref();
}

/**
 * An ack that leaves after ACK_DEFER_MS unless the answer starts first: acks bound how long an origin
 * waits on a lost forward, but a quick answer should not pay a message for one.
 */
function deferredAck(sendAck: () => void): { ack(): void; answered(): void } {
  let done = false;
  const entry = {
    due: 0,
    send() {
      done = true;
      sendAck();
    },
  };
  return {
    ack() {
      if (done || waitingAcks.has(entry)) return;
      entry.due = performance.now() + ACK_DEFER_MS;
      waitingAcks.add(entry);
      armAckTimer();
    },
    answered() {
      if (done) return;
      done = true;
      waitingAcks.delete(entry);
    },
  };
}
