/**
 * Fresh peer load (`freshPeerLoad`, beyond the paper). A snapshot header reports a peer's queue
 * depth once per Δpoll; between two, a burst of requests from every origin herds onto whichever peer
 * looked idle. So the depth also rides on every `forward-ack` and `result` a server sends (stamped
 * as the node's effects leave, with the depth after the input was handled), and an origin adds the
 * forwards it has in flight to a peer — sent, not yet acked or answered — to the depth it last heard.
 */
import type { EngineCosts } from "../snapshot.js";
import type { PeerLoad } from "./anti-entropy.js";
import { runTimeRatio } from "./engine-costs.js";
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

/** Prompt shape the push-back comparison prices both engines at (a typical uncached prompt, tokens). */
const TYPICAL_UNCACHED = 512;

/**
 * How many of our queued jobs one of `peer`'s is worth: its advertised run time against ours for a
 * typical prompt (`advertiseCosts`; 1 while either is unknown, i.e. queues compare by count).
 */
export function queueWeight(peer: EngineCosts | undefined, ours: EngineCosts | undefined): number {
  return runTimeRatio(peer, ours, TYPICAL_UNCACHED, 0) ?? 1;
}

/**
 * A peer pushing back is still routed to while its queue is shorter than ours (§3.2's exception:
 * local is worse still) — measured in our jobs, so a node 10× slower than its peers routes to a
 * pushing-back peer with ten times its queue, and a fast node never mistakes a slow peer's short
 * queue for a short wait.
 */
export function shorterQueue(
  peer: Readonly<Pick<PeerLoad, "queueDepth" | "costs">>,
  selfDepth: number,
  ours: EngineCosts | undefined,
): boolean {
  return peer.queueDepth * queueWeight(peer.costs, ours) < selfDepth;
}
