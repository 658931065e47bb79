/**
 * Membership (the static list, plus peers added or removed at run time, e.g. found by DNS) and the
 * failure detector of §3.3, nothing else: a peer silent for k × Δpoll is suspected and not routed to;
 * any message from it clears that. A transport failure (connection refused/reset) suspects at once; a
 * `goodbye` marks the peer down until its anti-entropy speaks again (it restarted), and so does a silence
 * past the down bound when one is set (a crash: suspected first, then down). What peers advertise and what we
 * measure of them belongs to the role that receives or measures it (anti-entropy.ts, origin.ts).
 */
import { invariant } from "../invariant.js";
import type { NodeConfig } from "./config.js";
import type { Liveness, NodeId, PeerView } from "./types.js";

interface PeerLiveness {
  lastHeard: number | undefined;
  /** Set by a transport failure; cleared by any message. */
  failed: boolean;
  /** Set by goodbye; cleared by a later snapshot (answers of the work it drains do not). */
  departed: boolean;
  /** Silence before its first word counts from here (our start, or when it was added). */
  since: number;
}

export class Membership {
  private readonly peers = new Map<NodeId, PeerLiveness>();
  private readonly ordered: NodeId[] = [];
  /** Silence after which a peer is suspected (k × Δpoll). */
  private readonly suspectAfterMs: number;
  /** Silence after which a peer is down (undefined: only a goodbye makes it down). */
  private readonly downAfterMs: number | undefined;

  constructor(
    ids: readonly NodeId[],
    detector: Pick<NodeConfig, "pollMs" | "suspectAfterPolls" | "downAfterPolls">,
    startedAt: number,
  ) {
    const { pollMs, suspectAfterPolls, downAfterPolls } = detector;
    this.suspectAfterMs = suspectAfterPolls * pollMs;
    this.downAfterMs = downAfterPolls === undefined ? undefined : downAfterPolls * pollMs;
    invariant(
      this.downAfterMs === undefined || this.downAfterMs > this.suspectAfterMs,
      "a silent peer is suspected before it is down",
    );
    for (const id of ids) this.insert(id, startedAt);
  }

  /**
   * Adds a peer at run time (e.g. found by DNS). It starts unknown: its silence is counted from now,
   * not from our start. Returns false if it is already a member.
   */
  add(id: NodeId, now: number): boolean {
    if (this.peers.has(id)) return false;
    this.insert(id, now);
    return true;
  }

  /** Drops a peer. Returns false if it was not a member. */
  remove(id: NodeId): boolean {
    if (!this.peers.delete(id)) return false;
    this.ordered.splice(this.ordered.indexOf(id), 1);
    invariant(this.ordered.length === this.peers.size, "membership list and map disagree");
    return true;
  }

  private insert(id: NodeId, since: number): void {
    this.peers.set(id, { lastHeard: undefined, failed: false, departed: false, since });
    this.ordered.push(id);
  }

  get size(): number {
    return this.ordered.length;
  }

  has(id: NodeId): boolean {
    return this.peers.has(id);
  }

  /** Members in the order they joined (the static list first). Read-only: copy to keep. */
  ids(): readonly NodeId[] {
    return this.ordered;
  }

  /** Any message from the peer: it is alive. */
  heard(id: NodeId, now: number, revives = true): void {
    const p = this.peers.get(id);
    if (!p) return;
    p.lastHeard = now;
    p.failed = false;
    if (revives) p.departed = false;
  }

  /** The transport could not reach it: suspected at once. */
  sendFailed(id: NodeId): void {
    const p = this.peers.get(id);
    if (p) p.failed = true;
  }

  /** It said goodbye: down until it speaks again. */
  departed(id: NodeId): void {
    const p = this.peers.get(id);
    if (p) p.departed = true;
  }

  /** A non-member is "down". */
  liveness(id: NodeId, now: number): Liveness {
    const p = this.peers.get(id);
    if (!p || p.departed) return "down";
    if (this.downAfterMs !== undefined && now - (p.lastHeard ?? p.since) > this.downAfterMs) return "down";
    if (p.failed) return "suspected";
    if (p.lastHeard === undefined) return now - p.since > this.suspectAfterMs ? "suspected" : "unknown";
    return now - p.lastHeard > this.suspectAfterMs ? "suspected" : "live";
  }

  /** Its part of the peer's `PeerView`: liveness, and ms since we last heard from it (undefined: never). */
  view(id: NodeId, now: number): Pick<PeerView, "liveness" | "silentMs"> {
    const heard = this.peers.get(id)?.lastHeard;
    return { liveness: this.liveness(id, now), silentMs: heard === undefined ? undefined : now - heard };
  }
}
