/**
 * Anti-entropy for `gossip: "scuttlebutt"`: the Scuttlebutt role (gossip/scuttlebutt.ts) behind the
 * surface node.ts uses of `AntiEntropy`. Each Δpoll our digest goes to `gossipFanout` live members,
 * not to all; estimates of any owner arrive from anyone (relays), bounded by `maxEstimates`. There are
 * no heartbeats (liveness is SWIM's) and no per-peer acks or RTT echoes: a member's advertised load
 * is what its last digest to us carried, or the header of the newest state of it we applied (relayed
 * or not), whichever came last.
 * A member we hold no estimate of is not routed to. Under `maxEstimates` members also swap cache
 * summaries (gossip/summary.ts), and a request whose first block no held estimate has brings in a
 * member whose summary lists it (`seek`); summaries also become holder hints, relayed (gossip/hints.ts).
 * Discovery lives in gossip/discovery.ts, members' loads and epochs in gossip/peer-reports.ts; what
 * the node only reads of this role, in gossip-views.ts.
 */
import { BLOCK_SIZE } from "../block-hash.js";
import type { EngineRequest, Tokens } from "../engine.js";
import { PeerIndex } from "../peer-index.js";
import type { OwnTree, RoundPeer } from "./anti-entropy.js";
import type { NodeConfig } from "./config.js";
import { Discovery, type Send } from "./gossip/discovery.js";
import { OwnStateCache } from "./gossip/own-state.js";
import { PeerReports, type Restart } from "./gossip/peer-reports.js";
import { type OwnState, Scuttlebutt } from "./gossip/scuttlebutt.js";
import { type MeshGossip, OwnSummary } from "./gossip/summary.js";
import { GossipViews } from "./gossip-views.js";
import type { Effect, NodeDeps, NodeId } from "./types.js";

const NO_IDS: NodeId[] = Object.freeze([]) as unknown as NodeId[];

export type { Restart };

export class GossipAntiEntropy extends GossipViews {
  private epoch = 0;
  protected sb!: Scuttlebutt;
  private readonly members = new Set<NodeId>();
  protected readonly reports: PeerReports;
  /** Recent matches of our traffic per owner: what keeps an estimate when maxEstimates is full. */
  private readonly useful = new Map<NodeId, number>();
  private now = 0;
  /** When we last guessed an owner's new prefix (an optimistic insert), our clock. */
  private readonly guessedAt = new Map<NodeId, number>();
  private stepArmed = false;
  /** Once bound (`bound()`): summaries, hints and seeks (discovery.ts). */
  protected discovery: Discovery | undefined;
  /** Ours (summary.ts): not reset with the rest; `own` refreshes it while discovery is bound. */
  private readonly ownSummary = new OwnSummary();
  /** When hints were last relayed, while no discovery is bound (a reset keeps the pace). */
  private hintsAt = Number.NEGATIVE_INFINITY;
  /** Owners held at most: summaries are asked for only when the members outnumber it. */
  private maxHeld = 0;
  /** Rounds of this Δpoll tick still to run (gossipRoundsPerPoll). */
  private extraRounds = 0;
  private readonly ownState: OwnStateCache;
  /** The live ids of the last round's `peers` (frozen peers: the same array, the same ids). */
  private live: { peers: readonly RoundPeer[]; ids: NodeId[] } | undefined;

  constructor(
    private readonly config: NodeConfig,
    private readonly selfId: NodeId,
    private readonly deps: NodeDeps,
  ) {
    super();
    this.ownState = new OwnStateCache(selfId);
    this.reports = new PeerReports(
      selfId,
      config.maxPushBackMs,
      (id) => this.members.has(id),
      (id) => this.discovery?.restarted(id),
    );
  }

  reset(epoch: number, ids: readonly NodeId[], maxOwners: number): void {
    this.epoch = epoch;
    this.members.clear();
    for (const id of ids) this.members.add(id);
    this.reports.clear();
    this.useful.clear();
    this.guessedAt.clear();
    this.stepArmed = false;
    this.extraRounds = 0;
    if (this.discovery !== undefined) this.hintsAt = this.discovery.hintsAt;
    this.discovery = undefined;
    const maxEstimates = Math.min(this.config.maxEstimates ?? maxOwners - 1, maxOwners - 1);
    this.maxHeld = maxEstimates;
    this.sb = new Scuttlebutt(
      this.selfId,
      new PeerIndex({ maxOwners: maxEstimates + 1 }),
      {
        random: () => this.deps.random(),
        now: () => this.now,
        member: (id) => this.members.has(id),
        score: (id) => this.useful.get(id) ?? 0,
        onApplied: (h) => this.reports.applied(h, this.now),
        settled: (id) =>
          this.now - (this.guessedAt.get(id) ?? Number.NEGATIVE_INFINITY) > 2 * this.config.pollMs,
      },
      {
        fanout: this.config.gossipFanout,
        deltaLog: 16,
        maxEstimates,
        maxStates: 256,
        maxDigest: 8_192,
        discoveryOdds: 8,
        // Whole key sets re-fetched for a discovery: at most one per 10 Δpoll.
        discoveryMs: 10 * this.config.pollMs,
        stepKeys: this.config.estimateStepKeys,
        chain: true,
        pendingMs: this.config.pollMs / 2,
      },
    );
    for (const [id, keys] of this.reports.caps) this.sb.index.capOwner(id, keys);
    if (this.config.maxEstimates !== undefined || this.members.size > this.maxHeld) this.bound();
  }

  /**
   * Holding some owners of many: discovery (summaries, hints) and owners pushing to their holders.
   * On from the start under `maxEstimates`; otherwise once the members outnumber what `maxPeers` lets
   * us hold (a mesh grown past it), and then for good: without them the owners we lack are never found.
   */
  private bound(): void {
    if (this.discovery !== undefined) return;
    const host = {
      member: (id: NodeId) => this.members.has(id),
      holds: (id: NodeId) => this.sb.holds(id),
      swapping: () => this.members.size > this.maxHeld,
      random: () => this.deps.random(),
    };
    this.discovery = new Discovery(this.selfId, this.config, host, this.ownSummary, this.hintsAt);
    // Holding some owners of many, a node rarely meets another holder of them: owners push.
    this.sb.pushToHolders();
  }

  add(id: NodeId): void {
    this.members.add(id);
    if (this.members.size > this.maxHeld) this.bound();
  }
  remove(id: NodeId): void {
    this.members.delete(id);
    this.discovery?.remove(id);
    this.reports.remove(id);
    this.forget(id);
  }
  forget(id: NodeId): void {
    this.sb.remove(id);
    this.reports.forget(id);
    this.useful.delete(id);
    this.guessedAt.delete(id);
  }

  /** A fresher queue depth than the newest state's header (freshPeerLoad: acks and answers). */
  queueReported(id: NodeId, queueDepth: number | undefined, now: number): void {
    this.reports.queueReported(id, queueDepth, now);
  }
  /** The capacity a member's hello advertised bounds our estimate of it, relayed or not. */
  capPeer(id: NodeId, capacityTokens: number): void {
    const keys = Math.ceil(capacityTokens / this.sb.index.blockSize);
    this.reports.capped(id, keys);
    this.sb.index.capOwner(id, keys);
  }
  /** A large key set applies in steps (estimateStepKeys), one `estimates` timer each. */
  scheduleSteps(out: Effect[]): void {
    if (this.stepArmed || !this.sb.busy) return;
    this.stepArmed = true;
    out.push({ type: "set-timer", timer: { kind: "estimates" }, delayMs: 0 });
  }
  onStepTimer(now: number, out: Effect[]): void {
    this.now = now;
    this.stepArmed = false;
    this.sb.step();
    this.scheduleSteps(out);
  }

  /**
   * A member SWIM just admitted: greeted at once (Scuttlebutt.greet), not left to the rounds. `pending`:
   * members SWIM is still verifying, counted among those we lack, so that while a cluster forms the
   * first members admitted (the same few everywhere) are not all greeted, and held sets stay spread.
   */
  greet(
    id: NodeId,
    pending: number,
    now: number,
    tree: OwnTree,
    queueDepth: number,
    pushBackMs: number,
    out: Effect[],
  ): void {
    this.now = now;
    if (!this.members.has(id)) return;
    // Owners held are members (a member's estimate goes when it does).
    const unheld = this.members.size - this.sb.held + pending;
    const msg = this.sb.greet(id, this.own(tree, queueDepth, pushBackMs), unheld);
    if (msg !== undefined) this.send(id, msg, queueDepth, pushBackMs, out);
  }

  /**
   * The Δpoll tick's round: our digest to `gossipFanout` random live members; the tick's other
   * `gossipRoundsPerPoll − 1` rounds follow at even spacing (`gossip-round` timers, `extraRound`).
   */
  round(
    now: number,
    tree: OwnTree,
    queueDepth: number,
    pushBackMs: number,
    peers: readonly RoundPeer[],
    out: Effect[],
  ): void {
    this.extraRounds = this.config.gossipRoundsPerPoll - 1;
    if (this.live?.peers !== peers || !Object.isFrozen(peers))
      this.live = { peers, ids: peers.filter((p) => p.live).map((p) => p.id) };
    this.roundTo(now, tree, queueDepth, pushBackMs, this.live.ids, out);
  }

  /** One of a Δpoll tick's later rounds (the node's `gossip-round` timer). */
  extraRound(
    now: number,
    tree: OwnTree,
    queueDepth: number,
    pushBackMs: number,
    live: readonly NodeId[],
    out: Effect[],
  ): void {
    if (this.extraRounds <= 0) return;
    this.extraRounds--;
    this.roundTo(now, tree, queueDepth, pushBackMs, live, out);
  }

  private roundTo(
    now: number,
    tree: OwnTree,
    queueDepth: number,
    pushBackMs: number,
    live: readonly NodeId[],
    out: Effect[],
  ): void {
    this.now = now;
    if (this.extraRounds > 0) {
      const delayMs = this.config.pollMs / this.config.gossipRoundsPerPoll;
      out.push({ type: "set-timer", timer: { kind: "gossip-round" }, delayMs });
    }
    if (live.length === 0) return;
    for (const { to, msg } of this.sb.round(live, this.own(tree, queueDepth, pushBackMs)))
      this.send(to, msg, queueDepth, pushBackMs, out);
    this.discovery?.passHints(live, true, now, this.sender(queueDepth, pushBackMs, out));
  }

  /** A gossip message from `from` (any member; a relay of other owners' states). */
  onGossip(
    from: NodeId,
    msg: MeshGossip,
    now: number,
    tree: OwnTree,
    queueDepth: number,
    pushBackMs: number,
    out: Effect[],
  ): void {
    this.now = now;
    if (!this.members.has(from)) return;
    const own = this.own(tree, queueDepth, pushBackMs);
    if (msg.type === "summary") {
      this.discovery?.onSummary(from, msg, this.sender(queueDepth, pushBackMs, out));
      return;
    }
    if (msg.type === "hints") {
      this.discovery?.onHints(
        from,
        msg,
        now,
        this.live?.ids ?? NO_IDS,
        this.sender(queueDepth, pushBackMs, out),
      );
      return;
    }
    const reports = this.reports;
    if (msg.type === "digest")
      for (const e of msg.entries) reports.sawEpoch(e.owner, e.epoch, e.owner === from);
    else
      for (const st of msg.states) {
        const h = st.snapshot.header;
        reports.sawEpoch(h.sender, h.epoch, h.sender === from);
      }
    if (msg.type === "digest" && msg.load !== undefined) reports.loadReported(from, msg.load, now);
    // Its own digest naming the version we hold confirms our estimate: an idle member's tree (no new
    // state to send) is not a stale estimate, and its age (`/cluster`, the metric) starts over.
    const self = msg.type === "digest" ? msg.entries.find((e) => e.owner === from) : undefined;
    const held = this.sb.estimates.held(from);
    if (self !== undefined && held?.epoch === self.epoch && held.version === self.version)
      reports.confirmed(from, now);
    if (msg.type === "digest" && msg.summary !== undefined)
      this.discovery?.onDigestTag(from, msg.summary, this.sender(queueDepth, pushBackMs, out));
    const answer = this.sb.onMessage(from, msg, own);
    if (answer !== undefined) this.send(from, answer, queueDepth, pushBackMs, out);
    const next = this.sb.continueRound(from, own);
    if (next !== undefined && this.members.has(next.to))
      this.send(next.to, next.msg, queueDepth, pushBackMs, out);
    this.scheduleSteps(out);
  }

  /**
   * Content discovery for a request about to be routed: when a member's summary shows it caches a
   * longer prefix of the request than we and every owner held do (by at least one checkpoint), that
   * member is taken as an owner now (Scuttlebutt `seek`: in place of the least useful one when full),
   * its estimate seeded with the prefix its summary proves (Algorithm 1's optimistic insert, never
   * relayed), and asked for its state, which then replaces the seed. At most one seek per Δpoll / 8.
   */
  seek(
    request: EngineRequest,
    selfMatch: number,
    now: number,
    queueDepth: number,
    pushBackMs: number,
    out: Effect[],
  ): void {
    const found = this.discovery?.find(request, selfMatch, now, this.sb.index);
    if (found === undefined) return;
    const { owner, seed } = found;
    const msg = this.sb.seek(owner);
    if (msg === undefined) return;
    this.now = now;
    this.useful.set(owner, Math.max(1, this.useful.get(owner) ?? 0));
    // A seed (not an update: the index holds no estimate of it yet), replaced by its state.
    this.sb.index.replaceEstimate(owner, { blockSize: BLOCK_SIZE, keys: seed });
    this.sb.polluted(owner);
    this.guessedAt.set(owner, now);
    this.send(owner, msg, queueDepth, pushBackMs, out);
  }

  /** A message to a member; a digest carries our load as we send it (its partner's view of our queue). */
  private send(to: NodeId, msg: MeshGossip, queueDepth: number, pushBackMs: number, out: Effect[]): void {
    const m: MeshGossip =
      msg.type === "digest"
        ? {
            ...msg,
            load: { queueDepth, pushBackMs },
            ...(this.discovery === undefined ? {} : { summary: this.ownSummary.tag }),
          }
        : msg;
    out.push({ type: "mesh-send", to, msg: { channel: "gossip", msg: m } });
  }
  /** `send` with this message's load bound, for discovery (discovery.ts). */
  private sender(queueDepth: number, pushBackMs: number, out: Effect[]): Send {
    return (to, msg) => this.send(to, msg, queueDepth, pushBackMs, out);
  }

  /** Algorithm 1 line 17, on an estimate we hold; it is then a guess and is never relayed whole. */
  believeServed(id: NodeId, tokens: Tokens, now: number): void {
    this.useful.set(id, (this.useful.get(id) ?? 0) + 1);
    this.guessedAt.set(id, now);
    if (!this.sb.holds(id)) return;
    this.sb.index.updateTrieEstimate(id, tokens);
    this.sb.polluted(id);
  }

  /** Owners whose header (queue depth) was applied since the last call: their queue is reported. */
  drainReported(): NodeId[] {
    return this.reports.drainReported();
  }

  /**
   * Members seen back in a newer epoch since the last call, each at the newest epoch seen (node.ts
   * fails over what an older incarnation of it took).
   */
  drainRestarted(): Restart[] {
    return this.reports.drainRestarted();
  }

  /** The newest epoch seen of `id`, gone from the membership, until it is heard back. */
  goneEpoch(id: NodeId): number | undefined {
    return this.reports.goneEpoch(id);
  }

  /**
   * Members heard back in a newer epoch than the one they left the membership in, since the last call:
   * a restart while they were out (trust.ts `restarted`; a refuted death is none).
   */
  drainRenewed(): NodeId[] {
    return this.reports.drainRenewed();
  }

  /** Our state as the gossip reads it (own-state.ts). */
  private own(tree: OwnTree, queueDepth: number, pushBackMs: number): OwnState {
    const summary = this.discovery === undefined ? undefined : this.ownSummary;
    return this.ownState.get(this.epoch, tree, queueDepth, pushBackMs, summary);
  }
}
