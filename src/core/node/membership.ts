/**
 * Static membership plus the failure detector of §3.3: a peer silent for k × Δpoll is suspected and
 * not routed to; any message from it clears that. A transport failure (connection refused/reset)
 * suspects at once; a `goodbye` marks the peer down until it speaks again. Also keeps what each
 * peer advertised (queue depth, push-back) and its measured RTT.
 */
import type { HeldVersion, Liveness, NodeId } from "./types.js";

export interface PeerState {
  readonly id: NodeId;
  lastHeard: number | undefined;
  /** Set by a transport failure; cleared by any message. */
  failed: boolean;
  /** Set by goodbye; cleared by any later message. */
  departed: boolean;
  /** Epoch of the peer's latest snapshot (a change means it restarted). */
  epoch: number | undefined;
  queueDepth: number;
  capacityTokens: number;
  pushBackUntil: number;
  /** When the estimate last changed or was confirmed (for the estimate's age). */
  estimateAt: number | undefined;
  rttMs: number | undefined;
  /** What the peer acknowledged holding of our tree. */
  holdsOfUs: HeldVersion | undefined;
  /**
   * Versions of our tree we sent it (delta or full) that its acks have not confirmed yet, oldest
   * first, with when we sent them: while young they are assumed delivered (the ack is in flight).
   */
  unconfirmed: { version: number; at: number }[];
  /** Smoothed time from sending a version to its ack arriving (≈ RTT + the peer's poll wait). */
  ackDelayMs: number | undefined;
  /** Our estimate of it was found polluted: ask for a full snapshot (omit our ack). */
  wantFull: boolean;
  /** When we last made an optimistic insert into its estimate (after a forwarded result). */
  optimisticAt: number;
}

export class Membership {
  private readonly peers = new Map<NodeId, PeerState>();
  private readonly ordered: PeerState[] = [];

  constructor(
    ids: readonly NodeId[],
    private readonly suspectAfterMs: number,
    private readonly startedAt: number,
  ) {
    for (const id of ids) {
      const p: PeerState = {
        id,
        lastHeard: undefined,
        failed: false,
        departed: false,
        epoch: undefined,
        queueDepth: 0,
        capacityTokens: 0,
        pushBackUntil: 0,
        estimateAt: undefined,
        rttMs: undefined,
        holdsOfUs: undefined,
        unconfirmed: [],
        ackDelayMs: undefined,
        wantFull: false,
        optimisticAt: Number.NEGATIVE_INFINITY,
      };
      this.peers.set(id, p);
      this.ordered.push(p);
    }
  }

  get(id: NodeId): PeerState | undefined {
    return this.peers.get(id);
  }

  all(): readonly PeerState[] {
    return this.ordered;
  }

  /** Any message from the peer: it is alive. */
  heard(p: PeerState, now: number): void {
    p.lastHeard = now;
    p.failed = false;
    p.departed = false;
  }

  liveness(p: PeerState, now: number): Liveness {
    if (p.departed) return "down";
    if (p.failed) return "suspected";
    if (p.lastHeard === undefined)
      return now - this.startedAt > this.suspectAfterMs ? "suspected" : "unknown";
    return now - p.lastHeard > this.suspectAfterMs ? "suspected" : "live";
  }

  /**
   * May receive forwarded requests: live, and not pushing back — unless our own queue is deeper than
   * the one it advertised (under cluster-wide overload, keeping work local would be worse still).
   */
  routable(p: PeerState, now: number, selfQueueDepth: number): boolean {
    return this.liveness(p, now) === "live" && (now >= p.pushBackUntil || p.queueDepth < selfQueueDepth);
  }

  /** Exponentially weighted RTT (α = 1/8, as TCP's SRTT). */
  sampleRtt(p: PeerState, ms: number): void {
    const v = Math.max(0, ms);
    p.rttMs = p.rttMs === undefined ? v : p.rttMs + (v - p.rttMs) / 8;
  }
}
