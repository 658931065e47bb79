/**
 * Fresh peer load (`freshPeerLoad`, beyond the paper). A snapshot header reports a peer's queue
 * depth once per Δpoll; between two, a burst of requests from every origin herds onto whichever peer
 * looked idle. So the depth also rides on every `forward-ack` and `result` a server sends (stamped
 * as the node's effects leave, with the depth after the input was handled), and an origin adds the
 * forwards it has in flight to a peer — sent, not yet acked or answered — to the depth it last heard.
 */
import type { Effect, PeerMessage } from "./types.js";

/** Depths above this from a peer are nonsense: ignored (a peer controls the number). */
export const MAX_REPORTED_DEPTH = 1_000_000;

/** Puts our queue depth on the acks and answers among `out`, replacing each message (never mutated). */
export function stampQueueDepth(out: Effect[], queueDepth: number): void {
  for (const e of out) {
    if (e.type !== "send") continue;
    if (e.msg.type === "forward-ack" || e.msg.type === "result") e.msg = { ...e.msg, queueDepth };
  }
}

/** The queue depth an ack or answer reports, if it carries a sane one. */
export function reportedDepth(msg: PeerMessage): number | undefined {
  if (msg.type !== "forward-ack" && msg.type !== "result") return undefined;
  const d = msg.queueDepth;
  return typeof d === "number" && Number.isInteger(d) && d >= 0 && d <= MAX_REPORTED_DEPTH ? d : undefined;
}
