/**
 * What members report of themselves to the gossip role (owned by one GossipAntiEntropy,
 * ../gossip-anti-entropy.ts): the cache its hello advertised, its load, from its own digests or the
 * header of its newest state applied (relayed or not), whichever came last, and its newest epoch, a
 * newer one being a restart. Apart from the rounds since it is the node's view of each peer, read by routing
 * and failover, whatever carried it.
 */
import type { SnapshotHeader } from "../../snapshot.js";
import { type PeerLoad, pushBackUntil } from "../peer-sync.js";
import type { NodeId } from "../types.js";
import type { DigestLoad } from "./config.js";

/** A member seen back in a newer epoch: a restart, `epoch` the newest seen of it. */
export interface Restart {
  id: NodeId;
  epoch: number;
}

const NO_IDS: NodeId[] = Object.freeze([]) as unknown as NodeId[];
const NO_RESTARTS: Restart[] = Object.freeze([]) as unknown as Restart[];

/** Hello-advertised caps remembered at most (members that come and go; the default maxMembers). */
const MAX_CAPS = 4_096;
/** Epochs of gone members remembered at most (the one gone longest is forgotten beyond). */
const MAX_GONE = 4_096;

const NO_LOAD: Readonly<PeerLoad> = {
  queueDepth: 0,
  queueAt: undefined,
  capacityTokens: 0,
  pushBackUntil: 0,
  estimateAt: undefined,
  treeTokens: undefined,
};

export class PeerReports {
  /**
   * The cache each member's hello advertised, in keys: kept across our restarts (a new index) and a
   * member's death (it may come back without a new hello); at most `maxCaps`, the oldest forgotten.
   */
  private readonly capKeys = new Map<NodeId, number>();
  private readonly loads = new Map<NodeId, PeerLoad>();
  /** Owners whose newest header was applied since `drainReported` last ran (bounded by the members). */
  private readonly reported = new Set<NodeId>();
  /**
   * Each member's newest epoch seen in a digest or a state (ours or relayed): a newer one is a restart
   * (sawEpoch), which voids its hints and loses what we forwarded it.
   */
  private readonly epochs = new Map<NodeId, number>();
  /** Members seen in a newer epoch since `drainRestarted` last ran. */
  private readonly restarted = new Set<NodeId>();
  /**
   * The newest epoch seen of each member gone, gone longest first, until one is heard of it back: a
   * newer one then is a restart while it was out (`drainRenewed`), the same one a refuted death.
   */
  private readonly gone = new Map<NodeId, number>();
  /** Members back in a newer epoch than they left in, since `drainRenewed` last ran. */
  private readonly renewed = new Set<NodeId>();

  constructor(
    private readonly selfId: NodeId,
    private readonly maxPushBackMs: number,
    /** Whether `id` is a member now. */
    private readonly member: (id: NodeId) => boolean,
    /** Told of each restart seen (its hints go). */
    private readonly onRestart: (id: NodeId) => void,
  ) {}

  /** Hello caps (`capped`), oldest first. */
  get caps(): ReadonlyMap<NodeId, number> {
    return this.capKeys;
  }
  /** A member's hello advertised a cache of `keys` keys. */
  capped(id: NodeId, keys: number): void {
    this.capKeys.delete(id);
    this.capKeys.set(id, keys);
    if (this.capKeys.size > MAX_CAPS) this.capKeys.delete(this.capKeys.keys().next().value as NodeId);
  }

  /** Our restart (a reset): all but the hello caps go. */
  clear(): void {
    this.loads.clear();
    this.reported.clear();
    this.epochs.clear();
    this.restarted.clear();
    this.gone.clear();
    this.renewed.clear();
  }
  /**
   * A member gone: its epoch (one back later is no restart of what we knew — its forwards failed over
   * as it went — but is kept in `gone` for `drainRenewed`; its load: `forget`).
   */
  remove(id: NodeId): void {
    // Back and gone again before its own word: what a relay said meanwhile may be older than the
    // epoch it first left in, which still stands.
    const epoch = Math.max(this.epochs.get(id) ?? -Infinity, this.gone.get(id) ?? -Infinity);
    this.epochs.delete(id);
    if (epoch === -Infinity) return;
    this.gone.delete(id);
    this.gone.set(id, epoch);
    if (this.gone.size > MAX_GONE) this.gone.delete(this.gone.keys().next().value as NodeId);
  }
  /** The newest epoch seen of `id`, gone, until it is heard back (`sawEpoch`). */
  goneEpoch(id: NodeId): number | undefined {
    return this.gone.get(id);
  }
  /** An estimate dropped: its load goes with it. */
  forget(id: NodeId): void {
    this.loads.delete(id);
  }

  load(id: NodeId): Readonly<PeerLoad> {
    return this.loads.get(id) ?? NO_LOAD;
  }
  /** A fresher queue depth than the newest state's header (freshPeerLoad: acks and answers). */
  queueReported(id: NodeId, queueDepth: number | undefined, now: number): void {
    const l = this.loads.get(id);
    if (l === undefined || queueDepth === undefined) return;
    l.queueDepth = queueDepth;
    l.queueAt = now;
  }

  /**
   * A member's load from its own digest: fresher than the header of its newest state, which changes
   * only with its tree. Only for a member we hold an estimate of (we route to no other).
   */
  loadReported(from: NodeId, load: DigestLoad, now: number): void {
    const l = this.loads.get(from);
    if (l === undefined) return;
    l.queueDepth = load.queueDepth;
    l.queueAt = now;
    l.pushBackUntil = pushBackUntil(now, load.pushBackMs, this.maxPushBackMs);
    this.reported.add(from);
  }

  /** A member's own digest named the state we hold of it: the estimate is current as of `now`. */
  confirmed(from: NodeId, now: number): void {
    const l = this.loads.get(from);
    if (l !== undefined) l.estimateAt = now;
  }

  /** The header of a member's newest state, just applied. */
  applied(h: SnapshotHeader, now: number): void {
    this.reported.add(h.sender);
    this.sawEpoch(h.sender, h.epoch);
    let l = this.loads.get(h.sender);
    if (l === undefined) {
      l = { ...NO_LOAD };
      this.loads.set(h.sender, l);
    }
    l.queueDepth = h.queueDepth;
    l.queueAt = now;
    l.capacityTokens = h.capacity;
    l.pushBackUntil = pushBackUntil(now, h.pushBackMs, this.maxPushBackMs);
    // Its speed (advertiseCosts), relayed or not: routing and push-back compare queues by it. A newer
    // header without costs (its owner restarted uncalibrated, or stopped advertising) clears them;
    // only newer states apply, so an older header (relays carry them as is) never puts them back.
    l.costs = h.costs;
    l.estimateAt = now;
    l.treeTokens = h.tokenCount;
  }

  /**
   * `owner` at `epoch`, as a digest or state from a member said. Epochs only grow, so a strictly newer
   * one than we knew is a restart — one SWIM never saw when the member came back within its suspicion
   * time: its cache is empty (every hint naming it stale), and the forwards and hedges waiting on it
   * are lost (its duplicate window went with it). The first epoch we see of a member is no news.
   * It may be a stale one a relay still carries, and then the member's current epoch reads as a
   * restart: node.ts fails over only what its acks show an older incarnation took
   * (forward-attempts.ts `lostTo`). `fromOwner`: the member said it itself (no relay).
   */
  sawEpoch(owner: NodeId, epoch: number, fromOwner = false): void {
    if (owner === this.selfId || !this.member(owner)) return;
    const left = this.gone.get(owner);
    // A relay may still carry the epoch it left in after it restarted (others' copies of its old
    // state): only a newer one, or its own word, settles the comparison; an older one is stale.
    if (left !== undefined && (epoch > left || (epoch === left && fromOwner))) {
      this.gone.delete(owner);
      if (epoch > left) this.renewed.add(owner);
    }
    const was = this.epochs.get(owner);
    if (was !== undefined && epoch <= was) return;
    this.epochs.set(owner, epoch);
    // Back in a newer epoch than it left in: what its old process acked since it was back is lost too.
    if (was === undefined && left !== undefined && epoch > left) this.restarted.add(owner);
    if (was === undefined) return;
    this.onRestart(owner);
    this.restarted.add(owner);
  }

  /** Members heard back in a newer epoch than they left in, since the last call (trust.ts `restarted`). */
  drainRenewed(): NodeId[] {
    if (this.renewed.size === 0) return NO_IDS;
    const ids = [...this.renewed];
    this.renewed.clear();
    return ids;
  }

  /** Owners whose header (queue depth) was applied since the last call: their queue is reported. */
  drainReported(): NodeId[] {
    if (this.reported.size === 0) return NO_IDS;
    const ids = [...this.reported];
    this.reported.clear();
    return ids;
  }

  /**
   * Members seen back in a newer epoch since the last call, each at the newest epoch seen (node.ts
   * fails over what an older incarnation of it took).
   */
  drainRestarted(): Restart[] {
    if (this.restarted.size === 0) return NO_RESTARTS;
    const r: Restart[] = [];
    for (const id of this.restarted) r.push({ id, epoch: this.epochs.get(id) as number });
    this.restarted.clear();
    return r;
  }
}
