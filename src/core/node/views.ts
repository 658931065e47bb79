/**
 * The node's read-only views that join several roles' state: one peer as the runtime shows it, and
 * every role's counters as one NodeStats. Pure functions of what the roles expose, so node.ts keeps
 * only control flow.
 */
import type { RoundPeer } from "./anti-entropy.js";
import type { Executor } from "./executor.js";
import type { Gossip, Members } from "./mesh.js";
import type { Origin } from "./origin.js";
import type { Serving } from "./serving.js";
import type { Targets } from "./targets.js";
import type { NodeId, NodeStats, PeerView } from "./types.js";

/** Every member as membership, anti-entropy and the origin's targets see it at `now`. */
export function peerViews(members: Members, antiEntropy: Gossip, origin: Origin, now: number): PeerView[] {
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
  antiEntropy: Gossip,
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

/** Every member as an anti-entropy round sees it: live or not, and its round trip. */
export function roundPeers(members: Members, targets: Targets, now: number): RoundPeer[] {
  return members
    .ids()
    .map((id) => ({ id, live: members.liveness(id, now) === "live", rttMs: targets.rttMs(id) }));
}
