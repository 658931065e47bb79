/**
 * Anti-entropy (§3.4), both ways. Out: every Δpoll each peer gets our header (queue depth, push-back:
 * the heartbeat) and whatever brings its estimate of us up to date — nothing if it holds our current
 * version, a delta from the base it holds when our change log reaches back, else the full tree — and
 * what it last told us it holds of us (its ack), what we sent it since (assumed delivered while young)
 * and the RTT echo decide which. In: a peer's snapshot is applied to our estimate of it (Estimates:
 * (epoch, version) only moves forward), its header is the load it advertises, and our ack (`holds`)
 * in the next round says what we hold, or asks for a full snapshot when our estimate is polluted.
 */
import type { Tokens } from "../engine.js";
import { Estimates } from "../estimates.js";
import { invariant } from "../invariant.js";
import { PeerIndex } from "../peer-index.js";
import type { RadixTree } from "../radix-tree.js";
import type { EngineCosts, Snapshot, SnapshotHeader } from "../snapshot.js";
import type { NodeConfig } from "./config.js";
import type { Effect, HeldVersion, NodeId, NodeStats, PeerMessage, PeerView, SnapshotEcho } from "./types.js";

/** Unconfirmed sends remembered per peer (older ones are forgotten; the window check still holds). */
const MAX_UNCONFIRMED = 64;

/** What a peer advertised in its latest header, as we received it. */
export interface PeerLoad {
  queueDepth: number;
  /** When its queue depth was last reported (our clock). */
  queueAt: number | undefined;
  capacityTokens: number;
  /** Tokens in its tree as its latest header said (undefined until one arrived). */
  treeTokens: number | undefined;
  /** Our clock until which it asked not to be routed to; 0 = none. */
  pushBackUntil: number;
  /** When our estimate of it last changed or was confirmed (for the estimate's age). */
  estimateAt: number | undefined;
  /** Its engine costs, as its latest header advertised them (`advertiseCosts`); undefined if none. */
  costs?: EngineCosts | undefined;
}

interface PeerSync extends PeerLoad {
  /** Epoch of its latest snapshot (a change means it restarted). */
  epoch: number | undefined;
  /** What it acknowledged holding of our tree. */
  holdsOfUs: HeldVersion | undefined;
  /**
   * Versions of our tree we sent it (delta or full) that its acks have not confirmed yet, oldest
   * first, with when we sent them: while young they are assumed delivered (the ack is in flight).
   */
  unconfirmed: { version: number; at: number }[];
  /**
   * `at` of our latest snapshot the peer had received when it sent its last message (its echo), and
   * of that message's ack (`holds`): a later send seen but an earlier version not held means the
   * earlier send was lost (or overtaken), whatever the optimism window says.
   */
  echoed: number | undefined;
  ackSawAt: number | undefined;
  /** Smoothed time from sending a version to its ack arriving (≈ RTT + the peer's poll wait). */
  ackDelayMs: number | undefined;
  /** Our estimate of it was found polluted: ask for a full snapshot (omit our ack). */
  wantFull: boolean;
  /** When we last made an optimistic insert into its estimate (after a forwarded result). */
  optimisticAt: number;
  /** `at` (its clock) of the last snapshot it sent us, and when it arrived (our clock): our echo. */
  echoT: number | undefined;
  echoRxAt: number;
}

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

/** Until when a member's advertised push-back holds, capped by ours (0: none): one rule for every carrier. */
export function pushBackUntil(now: number, pushBackMs: number, maxPushBackMs: number): number {
  return pushBackMs > 0 ? now + Math.min(pushBackMs, maxPushBackMs) : 0;
}

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
    this.peers.delete(id);
    this.caps.delete(id);
    this.index_.capOwner(id, undefined);
    this.joined.delete(id);
    this.estimates.remove(id);
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
      const base = this.baseFor(peer, now, rttMs, tree);
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
      if (snap.kind !== "heartbeat") {
        const q = peer.unconfirmed;
        const last = q[q.length - 1];
        if (last === undefined || last.version !== version) {
          invariant(last === undefined || last.version < version, "our tree's version went back");
          q.push({ version, at: now });
          if (q.length > MAX_UNCONFIRMED) q.shift();
        }
      }
      this.counters.snapshotsSent[snap.kind]++;
      const held = peer.wantFull ? undefined : this.estimates.held(id);
      const msg: PeerMessage = { type: "snapshot", snapshot: snap, blocks: tree.blockCount, at: now };
      if (held) msg.holds = held;
      if (peer.echoT !== undefined) msg.echo = { t: peer.echoT, heldMs: now - peer.echoRxAt };
      out.push({ type: "send", to: id, msg });
    }
  }

  /**
   * The RTT echo (types.ts): remembers the peer's send time for our next echo, and returns the round
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
    const peer = this.peer(id);
    if (typeof at === "number" && Number.isFinite(at)) {
      peer.echoT = at;
      peer.echoRxAt = now;
    }
    peer.echoed = echo !== undefined && Number.isFinite(echo.t) ? echo.t : undefined;
    if (echo === undefined) return undefined;
    const { t, heldMs } = echo;
    if (!Number.isFinite(t) || !Number.isFinite(heldMs) || heldMs < 0) return undefined;
    const rtt = now - t - heldMs;
    return rtt >= 0 && rtt <= this.config.forwardTimeoutMs ? rtt : undefined;
  }

  /**
   * A snapshot from peer `id` (`rttMs`: our RTT to it). `reported`: its header was taken as its
   * current load (not stale); `restarted`: it came back with a new epoch, losing what we forwarded.
   */
  onSnapshot(
    id: NodeId,
    s: Snapshot,
    holds: HeldVersion | undefined,
    blocks: number | undefined,
    now: number,
    rttMs: number | undefined,
  ): { reported: boolean; restarted: boolean } {
    const peer = this.peer(id);
    const h = s.header;
    const rx = this.counters.snapshotsReceived;
    if (h.sender !== id) {
      rx.invalid++;
      return { reported: false, restarted: false };
    }
    const restarted = peer.epoch !== undefined && h.epoch > peer.epoch;
    const verdict = this.estimates.apply(s);
    if (verdict === "applied") rx.applied++;
    else if (verdict === "duplicate") rx.duplicate++;
    else if (verdict === "need-full") rx.needFull++;
    else if (verdict === "deferred") rx.deferred++;
    else rx.stale++;
    // Older than what we hold: its load figures are older too.
    if (verdict === "stale") return { reported: false, restarted: false };
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
    this.onAck(peer, holds, now);
    return { reported: true, restarted };
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

  /**
   * The peer told us which version of our tree it holds. No ack = "nothing usable" (first contact,
   * restart, or a polluted estimate): forget our optimism so the next round sends a full snapshot.
   */
  private onAck(peer: PeerSync, holds: HeldVersion | undefined, now: number): void {
    peer.holdsOfUs = holds;
    // onEcho ran for this same message: its echo and its ack describe one moment of the peer.
    peer.ackSawAt = peer.echoed;
    const q = peer.unconfirmed;
    if (holds === undefined || holds.epoch !== this.epoch) {
      q.length = 0;
      return;
    }
    let confirmedAt: number | undefined;
    while (q.length > 0 && (q[0] as { version: number }).version <= holds.version) {
      const e = q.shift() as { version: number; at: number };
      if (e.version === holds.version) confirmedAt = e.at;
    }
    if (confirmedAt !== undefined) {
      const d = now - confirmedAt;
      peer.ackDelayMs = peer.ackDelayMs === undefined ? d : peer.ackDelayMs + (d - peer.ackDelayMs) / 8;
    }
  }

  /**
   * The version of our tree to build the peer's next update on (undefined: nothing usable → full).
   * What we sent recently is assumed delivered while its ack may still be in flight; once the oldest
   * unconfirmed send is clearly overdue (lost, or refused as "need-full"), fall back to the acked
   * version — usually still within our change log, so a delta rather than a full snapshot. Sooner
   * when its ack shows the send lost: it had received a later snapshot of ours yet holds less (a send
   * into a partition that healed would otherwise wait out the window) — only when a delta from the
   * acked version can be sent, so a large full snapshot still being applied in steps is not re-sent.
   */
  private baseFor(peer: PeerSync, now: number, rttMs: number | undefined, tree: OwnTree): number | undefined {
    const ack = peer.holdsOfUs;
    const acked = ack !== undefined && ack.epoch === this.epoch ? ack.version : undefined;
    const q = peer.unconfirmed;
    if (q.length > 0) {
      const poll = this.config.pollMs * (1 + this.config.pollJitter);
      // Before any ack has been timed, guess from k and the forward RTT (a slow link may then get a
      // few early full snapshots — small, the tree is young — until the first ack is timed).
      const window =
        peer.ackDelayMs === undefined
          ? 2 * this.config.suspectAfterPolls * poll + 2 * (rttMs ?? 0)
          : 2 * peer.ackDelayMs + poll;
      const sentAt = (q[0] as { at: number }).at;
      const lost =
        acked !== undefined &&
        peer.ackSawAt !== undefined &&
        peer.ackSawAt > sentAt &&
        tree.changesSince(acked) !== undefined;
      if (!lost && now - sentAt <= window) return (q[q.length - 1] as { version: number }).version;
      q.length = 0;
    }
    return acked;
  }
}

function newPeerSync(): PeerSync {
  return {
    epoch: undefined,
    queueDepth: 0,
    queueAt: undefined,
    capacityTokens: 0,
    treeTokens: undefined,
    pushBackUntil: 0,
    estimateAt: undefined,
    holdsOfUs: undefined,
    unconfirmed: [],
    echoed: undefined,
    ackSawAt: undefined,
    ackDelayMs: undefined,
    wantFull: false,
    optimisticAt: Number.NEGATIVE_INFINITY,
    echoT: undefined,
    echoRxAt: 0,
  };
}
