/**
 * The node's read-only views that join several roles' state: one peer as the runtime shows it, and
 * every role's counters as one NodeStats. Pure functions of what the roles expose, so node.ts keeps
 * only control flow.
 */
import { invariant } from "../invariant.js";
import type { PeerIndex } from "../peer-index.js";
import type { RadixTree } from "../radix-tree.js";
import type { RefusedView } from "../refusals.js";
import type { EngineCosts } from "../snapshot.js";
import type { RoundPeer } from "./anti-entropy.js";
import type { NodeConfig } from "./config.js";
import type { LearnedCosts } from "./cost-model.js";
import type { Executor } from "./executor.js";
import type { Gossip, Members } from "./mesh.js";
import type { Origin } from "./origin.js";
import type { Serving } from "./serving.js";
import type { SwimMemberView, SwimStats } from "./swim/types.js";
import { SwimMembership } from "./swim-membership.js";
import type { Targets } from "./targets.js";
import type { DepartedTrustView, Liveness, NodeDeps, NodeId, NodeStats, PeerView } from "./types.js";

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
export function roundPeers(members: Members, targets: Targets, now: number): readonly RoundPeer[] {
  if (members instanceof SwimMembership) return members.roundPeers();
  return members
    .ids()
    .map((id) => ({ id, live: members.liveness(id, now) === "live", rttMs: targets.rttMs(id) }));
}

/**
 * PrefixNode's read-only face: the getters the runtime, tests and invariant checks read. The roles
 * stay PrefixNode's (it builds and drives them); this class only reads them, so node.ts keeps the
 * control flow.
 */
export abstract class NodeViews {
  abstract readonly config: NodeConfig;
  protected abstract readonly deps: NodeDeps;
  protected abstract epoch: number;
  protected abstract members: Members;
  protected abstract readonly origin: Origin;
  protected abstract readonly serving: Serving;
  protected abstract readonly antiEntropy: Gossip;
  protected abstract readonly executor: Executor;
  protected abstract unknownSender: number;

  /** Most peers at once (`maxPeers`; default the static list's size). */
  maxPeers(): number {
    return this.config.maxPeers ?? this.config.peers.length;
  }

  get id(): NodeId {
    return this.config.id;
  }
  get currentEpoch(): number {
    return this.epoch;
  }
  get policyName(): string {
    return this.origin.policyName;
  }
  /** Jobs waiting or running here (what drains before a restart). */
  queueDepth(): number {
    return this.executor.queueDepth();
  }
  /** The depth peers are told (executor.ts `reportedDepth`: a held engine counts). */
  reportedDepth(): number {
    return this.executor.reportedDepth(this.deps.now());
  }
  /** Our engine's measured cost model (engine-costs.ts); undefined until a run or calibration. */
  engineCosts(): EngineCosts | undefined {
    return this.executor.engineCosts();
  }
  /** A peer's engine costs as its header advertised them (`advertiseCosts`). */
  peerCosts(id: NodeId): EngineCosts | undefined {
    return this.antiEntropy.load(id).costs;
  }
  treeSize(): number {
    return this.executor.tree.size;
  }
  treeVersion(): number {
    return this.executor.tree.version;
  }
  /** The exact local tree and the peer estimates (tests and invariant checks only: do not mutate). */
  localTree(): RadixTree {
    return this.executor.tree;
  }
  peerIndex(): PeerIndex {
    return this.antiEntropy.index;
  }
  heldOf(peer: NodeId): { epoch: number; version: number } | undefined {
    return this.antiEntropy.held(peer);
  }
  /** Whose output a client request of ours waits for now (origin.ts); undefined: not pending. */
  servingNow(reqId: string): NodeId | undefined {
    return this.origin.servingNow(reqId, this.config.id);
  }
  peers(): PeerView[] {
    return peerViews(this.members, this.antiEntropy, this.origin, this.deps.now());
  }
  /** The ids `peers()` lists, without building a view of each (observers that read every pair). */
  memberIds(): readonly NodeId[] {
    return this.members.ids();
  }
  /** `peer`'s liveness as `peers()` shows it now. */
  livenessOf(peer: NodeId): Liveness {
    return this.members.liveness(peer, this.deps.now());
  }
  /**
   * What an operator is shown: `peers()`, and under gossip "scuttlebutt" also the dead and departed
   * members SWIM still remembers, as down. SWIM removes a dead member from the membership (the full
   * mesh keeps it, down), yet that it died is what an operator must see.
   */
  shownPeers(): PeerView[] {
    const live = this.peers();
    if (!(this.members instanceof SwimMembership)) return live;
    const now = this.deps.now();
    for (const m of this.members.swim.formerMembers(now)) {
      if (m.id === this.config.id) continue;
      invariant(!this.members.has(m.id), "a former member is still a member");
      live.push({
        id: m.id,
        liveness: "down",
        silentMs: undefined,
        estimateAgeMs: undefined,
        held: undefined,
        estimateTokens: 0,
        queueDepth: 0,
        pushBackUntil: 0,
        holdsOfUs: undefined,
        ...this.origin.peerView(m.id),
        goneForMs: m.goneForMs,
        gone: m.status,
      });
    }
    return live;
  }
  /**
   * The trust kept of peers out of the membership (trust.ts), what each will come back with: the last
   * gone first, at most `limit`, each with the epoch it went in (a newer one back is a restart).
   */
  departedTrust(limit: number): { total: number; peers: DepartedTrustView[] } {
    const d = this.origin.trust.departedViews(this.deps.now(), limit);
    for (const p of d.peers) p.epoch = this.antiEntropy.goneEpoch(p.id);
    return d;
  }
  /**
   * gossip "scuttlebutt": every member SWIM holds, dead and departed ones included while remembered
   * (with their status); undefined on the full mesh, whose members are `peers()`.
   */
  meshMembers(): SwimMemberView[] | undefined {
    return this.members instanceof SwimMembership ? this.members.swim.memberViews() : undefined;
  }
  /**
   * gossip "scuttlebutt": the candidates SWIM refused and remembers, with the reason and when each
   * is asked again; undefined on the full mesh (its runtime checks static peers itself).
   */
  meshRefused(): RefusedView[] | undefined {
    return this.members instanceof SwimMembership
      ? this.members.swim.refusedMembers(this.deps.now())
      : undefined;
  }
  /**
   * gossip "scuttlebutt": our SWIM incarnation for our hello, once settled (swim.ts `saidIncarnation`);
   * undefined before, and on the full mesh.
   */
  meshIncarnation(): number | undefined {
    return this.members instanceof SwimMembership ? this.members.swim.saidIncarnation : undefined;
  }
  /**
   * gossip "scuttlebutt": the SWIM failure detector's own counts (probes, suspicions, refutations,
   * refused news, …) since this epoch began (a restart starts them over; a fresh copy per call);
   * undefined on the full mesh, which runs no SWIM.
   */
  meshStats(): SwimStats | undefined {
    return this.members instanceof SwimMembership ? { ...this.members.swim.stats } : undefined;
  }
  /**
   * The costs this node has learned (what cost-aware routing sees). Gossip "scuttlebutt": a member
   * not measured yet is priced at the median RTT measured to the others, not at the cold prior — a
   * node there measures only the members it talks to (SWIM probes, forwards), so most are
   * unmeasured for many rounds; the full mesh measures every peer at its first echo (one Δpoll).
   */
  learnedCosts(): LearnedCosts {
    const k = this.executor.learnedCosts();
    if (this.config.gossip === "full") return k;
    const typical = this.origin.targets.typicalRttMs();
    if (typical !== undefined) k.rttPriorMs = typical;
    return k;
  }
  /** Push-back we would advertise now (ms; 0 = none). */
  currentPushBackMs(): number {
    return this.executor.pushBackMs();
  }
  /** How long an attempt to a peer with this RTT may go unacked (origin.ts). */
  ackTimeoutMs(peer: { rttMs: number | undefined }): number {
    return this.origin.ackTimeoutMs(peer.rttMs);
  }

  /** Every role's counters, in one `NodeStats` (a fresh object per call). */
  stats(): Readonly<NodeStats> {
    return nodeStats(this.origin, this.serving, this.executor, this.antiEntropy, this.unknownSender);
  }
}
