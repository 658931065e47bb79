/**
 * Anti-entropy (§3.4), both ways. Out: every Δpoll each peer gets our header (queue depth, push-back:
 * the heartbeat) and whatever brings its estimate of us up to date — nothing if it holds our current
 * version, a delta from the base it holds when our change log reaches back, else the full tree — and
 * what it last told us it holds of us (its ack), what we sent it since (assumed delivered while young)
 * and the RTT echo decide which. In: a peer's snapshot is applied to our estimate of it (Estimates:
 * (epoch, version) only moves forward), its header is the load it advertises, and our ack (`holds`)
 * in the next round says what we hold, or asks for a full snapshot when our estimate is polluted.
 * What it keeps per peer is peer-sync.ts; the versions a peer holds of ours, sent-versions.ts; the RTT
 * echo, snapshot-echo.ts.
 */
import type { Tokens } from "../engine.js";
import { Estimates } from "../estimates.js";
import { invariant } from "../invariant.js";
import { PeerIndex } from "../peer-index.js";
import type { RadixTree } from "../radix-tree.js";
import type { Snapshot, SnapshotHeader } from "../snapshot.js";
import type { NodeConfig } from "./config.js";
import { newPeerSync, type PeerLoad, type PeerSync, pushBackUntil } from "./peer-sync.js";
import { baseFor, noteSent, takeAck } from "./sent-versions.js";
import { readEcho } from "./snapshot-echo.js";
import type { Effect, HeldVersion, NodeId, NodeStats, PeerMessage, PeerView, SnapshotEcho } from "./types.js";

/** The parts of our own tree a round reads. */
export type OwnTree = Pick<
  RadixTree,
  "version" | "size" | "capacity" | "blockCount" | "changesSince" | "snapshotBody" | "summaryKeys"
>;

/** One peer as a round needs it: whether it is live, and its RTT (node.ts joins these). */
export interface RoundPeer {
  id: NodeId;
  live: boolean;
  rttMs: number | undefined;
}

/** Epochs of peers removed at run time remembered at most (the one gone longest is forgotten beyond). */
export const MAX_GONE = 4_096;

export type AntiEntropyCounters = Pick<NodeStats, "snapshotsSent" | "snapshotsReceived">;

export class AntiEntropy {
  private epoch = 0;
  private index_!: PeerIndex;
  private estimates!: Estimates;
  private readonly peers = new Map<NodeId, PeerSync>();
  /** Per member, the most keys its estimate may hold (from the capacity in its hello). */
  private readonly caps = new Map<NodeId, number>();
  /** Peers added at run time that get our full state at the next round, live or not. */
  private readonly joined = new Set<NodeId>();
  /**
   * The newest epoch of each peer removed at run time (gone from DNS), gone longest first, until its
   * first snapshot back: a newer one then is a restart while it was out (`onSnapshot`'s `renewed`),
   * which its estimate, started anew, cannot tell.
   */
  private readonly gone = new Map<NodeId, number>();
  counters!: AntiEntropyCounters;
  /** An `estimates` timer is pending (staged work continues when it fires). */
  private stepArmed = false;

  constructor(
    private readonly config: NodeConfig,
    private readonly selfId: NodeId,
    private readonly newIndex: (maxOwners: number) => PeerIndex = (maxOwners) => new PeerIndex({ maxOwners }),
  ) {}

  /** A (re)start: our epoch, the members, and no estimates yet. */
  reset(epoch: number, ids: readonly NodeId[], maxOwners: number): void {
    this.epoch = epoch;
    this.index_ = this.newIndex(maxOwners);
    this.estimates = new Estimates(this.index_, this.config.estimateStepKeys);
    for (const [id, keys] of this.caps) this.index_.capOwner(id, keys);
    this.stepArmed = false;
    this.peers.clear();
    for (const id of ids) this.peers.set(id, newPeerSync());
    this.joined.clear();
    this.gone.clear();
    this.counters = {
      snapshotsSent: { full: 0, delta: 0, heartbeat: 0 },
      snapshotsReceived: { applied: 0, stale: 0, duplicate: 0, needFull: 0, invalid: 0, deferred: 0 },
    };
  }

  /** A peer added at run time: it gets our full state at the next round, before it has said a word. */
  add(id: NodeId): void {
    this.peers.set(id, newPeerSync());
    this.joined.add(id);
  }

  remove(id: NodeId): void {
    const epoch = Math.max(this.peers.get(id)?.epoch ?? -Infinity, this.gone.get(id) ?? -Infinity);
    if (epoch !== -Infinity) {
      this.gone.delete(id);
      this.gone.set(id, epoch);
      if (this.gone.size > MAX_GONE) this.gone.delete(this.gone.keys().next().value as NodeId);
    }
    this.peers.delete(id);
    this.caps.delete(id);
    this.index_.capOwner(id, undefined);
    this.joined.delete(id);
    this.estimates.remove(id);
  }

  /** The newest epoch seen of `id`, removed at run time, until its first snapshot back. */
  goneEpoch(id: NodeId): number | undefined {
    return this.gone.get(id);
  }

  /** The cache `id` advertised caps our estimate of it (in keys: one per block), across our restarts. */
  capPeer(id: NodeId, capacityTokens: number): void {
    const keys = Math.ceil(capacityTokens / this.index_.blockSize);
    this.caps.set(id, keys);
    this.index_.capOwner(id, keys);
  }

  /** The peer left: its estimate goes (what else we know of it stays until it returns). */
  forget(id: NodeId): void {
    this.estimates.remove(id);
  }

  /** The merged peer estimates (read-only outside this file). */
  get index(): PeerIndex {
    return this.index_;
  }

  /** Every member is routed to (with or without an estimate of it). */
  routes(_id: NodeId): boolean {
    return true;
  }

  held(id: NodeId): HeldVersion | undefined {
    return this.estimates.held(id);
  }

  load(id: NodeId): Readonly<PeerLoad> {
    return this.peer(id);
  }

  /** An ack or answer from it said its queue depth (`freshPeerLoad`): fresher than any header. */
  queueReported(id: NodeId, queueDepth: number | undefined, now: number): void {
    const peer = this.peers.get(id);
    if (!peer || queueDepth === undefined) return;
    peer.queueDepth = queueDepth;
    peer.queueAt = now;
  }

  /** Its part of the peer's `PeerView`: our estimate of it, what it advertised, what it holds of us. */
  view(
    id: NodeId,
    now: number,
  ): Pick<PeerView, "held" | "estimateTokens" | "queueDepth" | "pushBackUntil" | "holdsOfUs"> {
    const p = this.peer(id);
    return {
      held: this.estimates.held(id),
      estimateTokens: this.index_.estimateSize(id),
      queueDepth: p.queueDepth,
      pushBackUntil: p.pushBackUntil > now ? p.pushBackUntil : 0,
      holdsOfUs: p.holdsOfUs,
    };
  }

  private peer(id: NodeId): PeerSync {
    const p = this.peers.get(id);
    invariant(p !== undefined, () => `anti-entropy has no state for member ${id}`);
    return p;
  }

  /** One round: a snapshot for every peer, in `peers` order. */
  round(
    now: number,
    tree: OwnTree,
    queueDepth: number,
    pushBackMs: number,
    peers: readonly RoundPeer[],
    out: Effect[],
  ): void {
    const version = tree.version;
    const header: SnapshotHeader = {
      sender: this.selfId,
      epoch: this.epoch,
      version,
      tokenCount: tree.size,
      capacity: tree.capacity,
      queueDepth,
      pushBackMs,
    };
    let full: Snapshot | undefined;
    let heartbeat: Snapshot | undefined;
    const deltas = new Map<number, Snapshot | null>();
    for (const { id, live, rttMs } of peers) {
      const peer = this.peer(id);
      let snap: Snapshot | undefined;
      const base = baseFor(peer, now, rttMs, tree, this.epoch, this.config);
      // A peer added at run time gets our full state at its first tick, before it has said a word.
      const joined = this.joined.delete(id);
      if (!joined && (!live || base === version)) {
        heartbeat ??= { kind: "heartbeat", header };
        snap = heartbeat;
      } else if (base !== undefined) {
        let d = deltas.get(base);
        if (d === undefined) {
          const delta = tree.changesSince(base);
          d = delta ? { kind: "delta", header, delta } : null;
          deltas.set(base, d);
        }
        if (d) snap = d;
      }
      if (!snap) {
        full ??= { kind: "full", header, body: tree.snapshotBody() };
        snap = full;
      }
      if (snap.kind !== "heartbeat") noteSent(peer, version, now);
      this.counters.snapshotsSent[snap.kind]++;
      const held = peer.wantFull ? undefined : this.estimates.held(id);
      const msg: PeerMessage = { type: "snapshot", snapshot: snap, blocks: tree.blockCount, at: now };
      if (held) msg.holds = held;
      if (peer.echoT !== undefined) msg.echo = { t: peer.echoT, heldMs: now - peer.echoRxAt };
      out.push({ type: "send", to: id, msg });
    }
  }

  /**
   * The RTT echo (peer-messages.ts): remembers the peer's send time for our next echo, and returns the round
   * trip our last echoed snapshot made, if this one times it. Peer-supplied numbers: anything
   * non-finite, negative or longer than a forward may take is ignored, so a bad peer can only
   * bound-limit its own RTT.
   */
  onEcho(
    id: NodeId,
    at: number | undefined,
    echo: SnapshotEcho | undefined,
    now: number,
  ): number | undefined {
    return readEcho(this.peer(id), at, echo, now, this.config.forwardTimeoutMs);
  }

  /**
   * A snapshot from peer `id` (`rttMs`: our RTT to it). `reported`: its header was taken as its
   * current load (not stale); `restarted`: it came back with a new epoch; `renewed`: its first
   * snapshot since it was added back is of a newer epoch than it left in (a restart while it was out,
   * or since we forwarded to it again). Either way, which process took our forwards is unknown.
   */
  onSnapshot(
    id: NodeId,
    s: Snapshot,
    holds: HeldVersion | undefined,
    blocks: number | undefined,
    now: number,
    rttMs: number | undefined,
  ): { reported: boolean; restarted: boolean; renewed: boolean } {
    const peer = this.peer(id);
    const h = s.header;
    const rx = this.counters.snapshotsReceived;
    if (h.sender !== id) {
      rx.invalid++;
      return { reported: false, restarted: false, renewed: false };
    }
    const restarted = peer.epoch !== undefined && h.epoch > peer.epoch;
    // Its own snapshot (no relay here): the epoch it left in again is the same process.
    const left = this.gone.get(id);
    const renewed = left !== undefined && h.epoch > left;
    if (left !== undefined && h.epoch >= left) this.gone.delete(id);
    const verdict = this.estimates.apply(s);
    if (verdict === "applied") rx.applied++;
    else if (verdict === "duplicate") rx.duplicate++;
    else if (verdict === "need-full") rx.needFull++;
    else if (verdict === "deferred") rx.deferred++;
    else rx.stale++;
    // Older than what we hold: its load figures are older too.
    if (verdict === "stale") return { reported: false, restarted: false, renewed };
    if (peer.epoch === undefined || h.epoch >= peer.epoch) peer.epoch = h.epoch;
    peer.queueDepth = h.queueDepth;
    peer.queueAt = now;
    peer.capacityTokens = h.capacity;
    peer.treeTokens = h.tokenCount;
    peer.pushBackUntil = pushBackUntil(now, h.pushBackMs, this.config.maxPushBackMs);
    if (h.costs !== undefined) peer.costs = h.costs;
    if (verdict === "deferred") {
      // Taken in steps (or queued behind one): the estimate and its checks follow when it is in; a
      // full one on its way in answers a request for one.
      if (s.kind === "full") peer.wantFull = false;
    } else if (verdict === "need-full") {
      // The update did not fit what we hold. If we hold something, our ack keeps saying what, and the
      // sender falls back to a delta from there once its optimism about the lost send runs out; if
      // we hold nothing of this epoch, ask for the full state at once (omit our ack).
      if ((this.estimates.held(id)?.version ?? 0) === 0) peer.wantFull = true;
    } else {
      // A full snapshot is the truth at its version, even one we "already hold": it also repairs
      // an estimate polluted by a wrong optimistic insert.
      if (verdict === "duplicate" && s.kind === "full") this.estimates.repair(s);
      peer.estimateAt = now;
      // Optimistic inserts only ever add keys, so a count above the sender's means a wrong guess.
      const held = this.estimates.held(id);
      // A snapshot that overtook the result of our last forward (jitter) may predate the peer's
      // insert: only trust the count once an RTT has passed since that optimistic insert.
      const settled = now - peer.optimisticAt > (rttMs ?? 0) + 1;
      if (blocks !== undefined && held?.epoch === h.epoch && held.version === h.version && settled) {
        peer.wantFull = this.index_.estimateSize(id) !== blocks * this.index_.blockSize;
      } else if (s.kind === "full") peer.wantFull = false;
    }
    takeAck(peer, holds, this.epoch, now);
    return { reported: true, restarted, renewed };
  }

  /**
   * Arms the `estimates` timer while staged snapshot work remains (config `estimateStepKeys`): each
   * firing does one bounded step, so a snapshot at the key cap never holds the node for long.
   */
  scheduleSteps(out: Effect[]): void {
    if (this.stepArmed || !this.estimates.busy) return;
    this.stepArmed = true;
    out.push({ type: "set-timer", timer: { kind: "estimates" }, delayMs: 0 });
  }

  /** The `estimates` timer: one step of staged work; a snapshot whose apply completes stamps its peer. */
  onStepTimer(now: number, out: Effect[]): void {
    this.stepArmed = false;
    const wasStaged = this.index_.replacing;
    for (const { sender, outcome } of this.estimates.step()) {
      if (outcome === "applied" && this.peers.has(sender)) this.peer(sender).estimateAt = now;
    }
    if (wasStaged !== undefined && this.index_.replacing !== wasStaged && this.peers.has(wasStaged)) {
      this.peer(wasStaged).estimateAt = now;
    }
    this.scheduleSteps(out);
  }

  /** Algorithm 1 line 17: the peer now caches this prompt; believe it until its next snapshot. */
  believeServed(id: NodeId, tokens: Tokens, now: number): void {
    this.index_.updateTrieEstimate(id, tokens);
    this.peer(id).optimisticAt = now;
  }
}
