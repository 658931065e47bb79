/**
 * Membership (the static list, plus peers added or removed at run time, e.g. found by DNS) and the
 * failure detector of §3.3: a peer silent for k × Δpoll is suspected and not routed to; any message
 * from it clears that. A transport failure (connection refused/reset)
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
  /** When its queue depth was last reported (our clock), and forwards we sent it since then. */
  queueAt: number | undefined;
  sentSinceQueue: number;
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
  /** `at` (its clock) of the last snapshot it sent us, and when it arrived (our clock): our echo. */
  echoT: number | undefined;
  echoRxAt: number;
  /**
   * Forwards to it must be acked in time. True until it answers several forwards whose ack never came
   * (a peer that does not ack, e.g. an older version); any ack from it sets it again.
   */
  acksForwards: boolean;
  /** Answers in a row to attempts we had abandoned for want of an ack, with no ack in between. */
  missedAcks: number;
}

export class Membership {
  private readonly peers = new Map<NodeId, PeerState>();
  private readonly ordered: PeerState[] = [];
  /** When peers added at run time joined (static peers count from `startedAt`). */
  private readonly joinedAt = new Map<NodeId, number>();

  constructor(
    ids: readonly NodeId[],
    private readonly suspectAfterMs: number,
    private readonly startedAt: number,
  ) {
    for (const id of ids) this.insert(newPeerState(id));
  }

  /**
   * Adds a peer at run time (e.g. found by DNS). It starts unknown: its silence is counted from now,
   * not from our start. Returns undefined if it is already a member.
   */
  add(id: NodeId, now: number): PeerState | undefined {
    if (this.peers.has(id)) return undefined;
    this.joinedAt.set(id, now);
    return this.insert(newPeerState(id));
  }

  /** Drops a peer and everything we kept about it. Returns false if it was not a member. */
  remove(id: NodeId): boolean {
    const p = this.peers.get(id);
    if (!p) return false;
    this.peers.delete(id);
    this.joinedAt.delete(id);
    this.ordered.splice(this.ordered.indexOf(p), 1);
    return true;
  }

  get size(): number {
    return this.ordered.length;
  }

  private insert(p: PeerState): PeerState {
    this.peers.set(p.id, p);
    this.ordered.push(p);
    return p;
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
    if (p.lastHeard === undefined) {
      const since = this.joinedAt.get(p.id) ?? this.startedAt;
      return now - since > this.suspectAfterMs ? "suspected" : "unknown";
    }
    return now - p.lastHeard > this.suspectAfterMs ? "suspected" : "live";
  }

  /**
   * May receive forwarded requests: live, and not pushing back — unless our own queue is deeper than
   * the one it advertised (under cluster-wide overload, keeping work local would be worse still).
   */
  routable(p: PeerState, now: number, selfQueueDepth: number): boolean {
    return this.liveness(p, now) === "live" && (now >= p.pushBackUntil || p.queueDepth < selfQueueDepth);
  }

  /**
   * Exponentially weighted RTT: up slowly (α = 1/8, as TCP's SRTT), down fast (α = 1/2). A
   * connection's first samples carry one-off costs (TCP and TLS set-up: 30–100 ms on loopback vs ≈ 4 ms
   * after), which at 1/8 took dozens of rounds to fade and kept cost-aware routing from forwarding to a
   * near peer for a fresh cluster's first seconds; brief spikes still move the estimate little.
   */
  sampleRtt(p: PeerState, ms: number): void {
    const v = Math.max(0, ms);
    if (p.rttMs === undefined) p.rttMs = v;
    else p.rttMs += (v - p.rttMs) / (v < p.rttMs ? 2 : 8);
  }
}

function newPeerState(id: NodeId): PeerState {
  return {
    id,
    lastHeard: undefined,
    failed: false,
    departed: false,
    epoch: undefined,
    queueDepth: 0,
    queueAt: undefined,
    sentSinceQueue: 0,
    capacityTokens: 0,
    pushBackUntil: 0,
    estimateAt: undefined,
    rttMs: undefined,
    holdsOfUs: undefined,
    unconfirmed: [],
    ackDelayMs: undefined,
    wantFull: false,
    optimisticAt: Number.NEGATIVE_INFINITY,
    echoT: undefined,
    echoRxAt: 0,
    acksForwards: true,
    missedAcks: 0,
  };
}
