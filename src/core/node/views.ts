/**
 * The node's read-only views that join several roles' state: one peer as the runtime shows it, and
 * every role's counters as one NodeStats. Pure functions of what the roles expose, so node.ts keeps
 * only control flow.
 */
import type { AntiEntropy } from "./anti-entropy.js";
import type { Executor } from "./executor.js";
import type { Membership } from "./membership.js";
import type { Origin } from "./origin.js";
import type { Serving } from "./serving.js";
import type { NodeId, NodeStats, PeerView } from "./types.js";

/** Every member as membership, anti-entropy and the origin's targets see it at `now`. */
export function peerViews(
  members: Membership,
  antiEntropy: AntiEntropy,
  origin: Origin,
  now: number,
): PeerView[] {
  return members.ids().map((id: NodeId) => ({
    id,
    ...members.view(id, now),
    ...antiEntropy.view(id, now),
    ...origin.peerView(id),
  }));
}

/** Every role's counters in one NodeStats (a fresh object per call). */
export function nodeStats(
  origin: Origin,
  serving: Serving,
  executor: Executor,
  antiEntropy: AntiEntropy,
  unknownSender: number,
): NodeStats {
  const o = origin.counters;
  const s = serving.counters;
  const { snapshotsSent, snapshotsReceived } = antiEntropy.counters;
  return {
    ...o,
    ...s,
    ...executor.counters,
    ...origin.spot.counters,
    rejectedOverload: o.rejectedOverload + s.rejectedOverload,
    invalidMessages: o.invalidMessages + s.invalidMessages,
    unknownSender,
    snapshotsSent: { ...snapshotsSent },
    snapshotsReceived: { ...snapshotsReceived },
  };
}
