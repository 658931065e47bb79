/**
 * GossipAntiEntropy's read-only face, as views.ts is node.ts's: what the node reads of the Scuttlebutt
 * role through the AntiEntropy surface (the index, held versions, members' loads, peer views, hint
 * stats, counters in anti-entropy's terms), and the full mesh's calls it answers with nothing. The
 * state stays GossipAntiEntropy's (it builds and drives it); this class only reads it.
 */
import type { PeerIndex } from "../peer-index.js";
import type { AntiEntropyCounters } from "./anti-entropy.js";
import type { Discovery } from "./gossip/discovery.js";
import type { PeerReports } from "./gossip/peer-reports.js";
import type { Scuttlebutt } from "./gossip/scuttlebutt.js";
import type { PeerLoad } from "./peer-sync.js";
import type { HeldVersion, NodeId, PeerView, SnapshotEcho } from "./types.js";

export abstract class GossipViews {
  protected abstract sb: Scuttlebutt;
  protected abstract readonly reports: PeerReports;
  protected abstract discovery: Discovery | undefined;

  /** Holder hints held, and hints messages refused by the per-sender bound (0 without hints). */
  get hintStats(): { keys: number; dropped: number } {
    return this.discovery?.stats ?? { keys: 0, dropped: 0 };
  }
  get index(): PeerIndex {
    return this.sb.index;
  }
  get counters(): AntiEntropyCounters {
    const c = this.sb.counters;
    const r = c.statesReceived;
    return {
      snapshotsSent: { full: c.statesSent.full, delta: c.statesSent.delta, heartbeat: 0 },
      snapshotsReceived: {
        applied: r.applied,
        stale: r.stale,
        duplicate: r.duplicate,
        needFull: r.needFull,
        invalid: c.invalid + r.dropped,
        deferred: r.deferred,
      },
    };
  }
  held(id: NodeId): HeldVersion | undefined {
    return this.sb.estimates.held(id);
  }
  load(id: NodeId): Readonly<PeerLoad> {
    return this.reports.load(id);
  }
  /** Only members we hold an estimate of are routed to. */
  routes(id: NodeId): boolean {
    return this.sb.holds(id);
  }
  view(
    id: NodeId,
    now: number,
  ): Pick<
    PeerView,
    "held" | "estimateTokens" | "queueDepth" | "pushBackUntil" | "holdsOfUs" | "estimateAgeMs"
  > {
    const l = this.load(id);
    return {
      held: this.held(id),
      estimateAgeMs: l.estimateAt === undefined ? undefined : Math.max(0, now - l.estimateAt),
      estimateTokens: this.sb.index.estimateSize(id),
      queueDepth: l.queueDepth,
      pushBackUntil: l.pushBackUntil > now ? l.pushBackUntil : 0,
      holdsOfUs: undefined,
    };
  }

  /** No RTT echo rides on digests. */
  onEcho(
    _id: NodeId,
    _at: number | undefined,
    _echo: SnapshotEcho | undefined,
    _now: number,
  ): number | undefined {
    return undefined;
  }
  /** Snapshots are the full mesh's: refused here. */
  onSnapshot(): { reported: boolean; restarted: boolean; renewed: boolean } {
    return { reported: false, restarted: false, renewed: false };
  }
}
