/**
 * Fresh peer load (`freshPeerLoad`, beyond the paper). A snapshot header reports a peer's queue
 * depth once per Δpoll; between two, a burst of requests from every origin herds onto whichever peer
 * looked idle. So the depth also rides on every `forward-ack` and `result` a server sends (stamped
 * as the node's effects leave, with the depth after the input was handled), and an origin adds the
 * forwards it has in flight to a peer — sent, not yet acked or answered — to the depth it last heard.
 */
import type { EngineRequest } from "../engine.js";
import { keyTokens, promptMatch } from "../namespace.js";
import type { PeerIndex } from "../peer-index.js";
import type { EngineCosts } from "../snapshot.js";
import type { LearnedCosts } from "./cost-model.js";
import { runTimeRatio } from "./engine-costs.js";
import type { PeerLoad } from "./peer-sync.js";
import type { Effect, NodeId, PeerMessage } from "./types.js";

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
 * queue for a short wait. `savedJobs` (`pushBackByCache`): what the peer's cache saves this request
 * counts on our side.
 */
export function shorterQueue(
  peer: Readonly<Pick<PeerLoad, "queueDepth" | "costs">>,
  selfDepth: number,
  ours: EngineCosts | undefined,
  savedJobs = 0,
): boolean {
  return peer.queueDepth * queueWeight(peer.costs, ours) < selfDepth + savedJobs;
}

/**
 * `pushBackByCache`: the prefill a peer's estimated match of a prompt saves it against ours, in our
 * service times. When every queue is long (a cold start: every cache empty while arrivals keep
 * coming) every node pushes back, and a request whose prefix only a pushing-back peer holds would
 * otherwise prefill it again here: more work exactly where there is least room for it.
 */
export function cacheSavedJobs(
  peer: Readonly<{ estimatedMatch: number }>,
  self: Readonly<{ match: number }>,
  k: LearnedCosts,
): number {
  if (!(k.serviceMs > 0)) return 0;
  return (k.prefillMsPerToken * Math.max(0, peer.estimatedMatch - self.match)) / k.serviceMs;
}

/** `cacheSavedJobs` for a planned peer, from its estimate in `index` (that owner's walk only). */
export function cacheSavedJobsAt(
  index: PeerIndex,
  peer: NodeId,
  request: EngineRequest,
  self: Readonly<{ match: number }>,
  k: LearnedCosts,
): number {
  const match = index.match(peer, keyTokens(request));
  return cacheSavedJobs({ estimatedMatch: promptMatch(request, match) }, self, k);
}
