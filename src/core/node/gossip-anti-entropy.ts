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
 */
import { BLOCK_SIZE, blockKeys } from "../block-hash.js";
import type { EngineRequest, Tokens } from "../engine.js";
import { keyTokens } from "../namespace.js";
import { PeerIndex } from "../peer-index.js";
import type { SnapshotHeader } from "../snapshot.js";
import {
  type AntiEntropyCounters,
  type OwnTree,
  type PeerLoad,
  pushBackUntil,
  type RoundPeer,
} from "./anti-entropy.js";
import type { NodeConfig } from "./config.js";
import type { DigestLoad } from "./gossip/config.js";
import { HintLimit } from "./gossip/hint-limit.js";
import { Hints } from "./gossip/hints.js";
import { type OwnState, Scuttlebutt } from "./gossip/scuttlebutt.js";
import { pickDistinct } from "./gossip/states.js";
import {
  checkpoints,
  type MeshGossip,
  OwnSummary,
  SUMMARY_MAX_BLOCKS,
  SummaryIndex,
  type SummaryMessage,
} from "./gossip/summary.js";
import type { Effect, HeldVersion, NodeDeps, NodeId, PeerView, SnapshotEcho } from "./types.js";

const NO_IDS: NodeId[] = Object.freeze([]) as unknown as NodeId[];
const NO_RESTARTS: Restart[] = Object.freeze([]) as unknown as Restart[];

/** A member seen back in a newer epoch: a restart, `epoch` the newest seen of it. */
export interface Restart {
  id: NodeId;
  epoch: number;
}

/** Hello-advertised caps remembered at most (members that come and go; the default maxMembers). */
const MAX_CAPS = 4_096;
/** Members' cache summaries held at most (each ≤ SUMMARY_MAX_KEYS keys). */
const MAX_SUMMARIES = 1_024;

const NO_LOAD: Readonly<PeerLoad> = {
  queueDepth: 0,
  queueAt: undefined,
  capacityTokens: 0,
  pushBackUntil: 0,
  estimateAt: undefined,
  treeTokens: undefined,
};

export class GossipAntiEntropy {
  private epoch = 0;
  private sb!: Scuttlebutt;
  private readonly members = new Set<NodeId>();
  private readonly loads = new Map<NodeId, PeerLoad>();
  /** Recent matches of our traffic per owner: what keeps an estimate when maxEstimates is full. */
  private readonly useful = new Map<NodeId, number>();
  private now = 0;
  /** When we last guessed an owner's new prefix (an optimistic insert), our clock. */
  private readonly guessedAt = new Map<NodeId, number>();
  /** Owners whose newest header was applied since `drainReported` last ran (bounded by the members). */
  private readonly reported = new Set<NodeId>();
  /**
   * The cache each member's hello advertised, in keys: kept across our restarts (a new index) and a
   * member's death (it may come back without a new hello); at most `maxCaps`, the oldest forgotten.
   */
  private readonly caps = new Map<NodeId, number>();
  private stepArmed = false;
  /** Once bound (`bound()`): the summaries of members we met (summary.ts), ours, our last seek. */
  private summaries: SummaryIndex | undefined;
  private readonly ownSummary = new OwnSummary();
  /** Once bound (`bound()`): holder hints, relayed (hints.ts). */
  private hints: Hints | undefined;
  /** Hints messages each sender may send (hint-limit.ts). */
  private hintLimit: HintLimit | undefined;
  /**
   * Each member's newest epoch seen in a digest or a state (ours or relayed): a newer one is a restart
   * (sawEpoch), which voids its hints and loses what we forwarded it.
   */
  private readonly epochs = new Map<NodeId, number>();
  /** Members seen in a newer epoch since `drainRestarted` last ran. */
  private readonly restarted = new Set<NodeId>();
  private hintsAt = Number.NEGATIVE_INFINITY;
  private seekAt = Number.NEGATIVE_INFINITY;
  /** Owners held at most: summaries are asked for only when the members outnumber it. */
  private maxHeld = 0;
  /** Rounds of this Δpoll tick still to run (gossipRoundsPerPoll). */
  private extraRounds = 0;
  /** The last `own` and the tree it reads. */
  private ownState: OwnState | undefined;
  private ownTree: OwnTree | undefined;
  /** The live ids of the last round's `peers` (frozen peers: the same array, the same ids). */
  private live: { peers: readonly RoundPeer[]; ids: NodeId[] } | undefined;

  constructor(
    private readonly config: NodeConfig,
    private readonly selfId: NodeId,
    private readonly deps: NodeDeps,
  ) {}

  reset(epoch: number, ids: readonly NodeId[], maxOwners: number): void {
    this.epoch = epoch;
    this.members.clear();
    for (const id of ids) this.members.add(id);
    this.loads.clear();
    this.useful.clear();
    this.guessedAt.clear();
    this.reported.clear();
    this.epochs.clear();
    this.restarted.clear();
    this.stepArmed = false;
    this.extraRounds = 0;
    this.summaries = undefined;
    this.hints = undefined;
    this.hintLimit = undefined;
    this.seekAt = Number.NEGATIVE_INFINITY;
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
        onApplied: (h) => this.applied(h),
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
    for (const [id, keys] of this.caps) this.sb.index.capOwner(id, keys);
    if (this.config.maxEstimates !== undefined || this.members.size > this.maxHeld) this.bound();
  }

  /**
   * Holding some owners of many: discovery (summaries, hints) and owners pushing to their holders.
   * On from the start under `maxEstimates`; otherwise once the members outnumber what `maxPeers` lets
   * us hold (a mesh grown past it), and then for good: without them the owners we lack are never found.
   */
  private bound(): void {
    if (this.summaries !== undefined) return;
    this.summaries = new SummaryIndex(MAX_SUMMARIES);
    this.hints = new Hints(this.selfId);
    this.hintLimit = new HintLimit(16 + this.config.gossipRoundsPerPoll, this.config.pollMs);
    // Holding some owners of many, a node rarely meets another holder of them: owners push.
    this.sb.pushToHolders();
  }

  add(id: NodeId): void {
    this.members.add(id);
    if (this.members.size > this.maxHeld) this.bound();
  }
  remove(id: NodeId): void {
    this.members.delete(id);
    this.summaries?.remove(id);
    this.hints?.remove(id);
    this.hintLimit?.remove(id);
    this.epochs.delete(id);
    this.forget(id);
  }
  forget(id: NodeId): void {
    this.sb.remove(id);
    this.loads.delete(id);
    this.useful.delete(id);
    this.guessedAt.delete(id);
  }

  /** Holder hints held, and hints messages refused by the per-sender bound (0 without hints). */
  get hintStats(): { keys: number; dropped: number } {
    return { keys: this.hints?.keys ?? 0, dropped: this.hintLimit?.dropped ?? 0 };
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
    return this.loads.get(id) ?? NO_LOAD;
  }
  /** A fresher queue depth than the newest state's header (freshPeerLoad: acks and answers). */
  queueReported(id: NodeId, queueDepth: number | undefined, now: number): void {
    const l = this.loads.get(id);
    if (l === undefined || queueDepth === undefined) return;
    l.queueDepth = queueDepth;
    l.queueAt = now;
  }
  /** The capacity a member's hello advertised bounds our estimate of it, relayed or not. */
  capPeer(id: NodeId, capacityTokens: number): void {
    const keys = Math.ceil(capacityTokens / this.sb.index.blockSize);
    this.caps.delete(id);
    this.caps.set(id, keys);
    if (this.caps.size > MAX_CAPS) this.caps.delete(this.caps.keys().next().value as NodeId);
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
    this.passHints(live, true, queueDepth, pushBackMs, out);
  }

  /**
   * Queued hints (hints.ts; with `announce`, our own summary's new keys too) in one message to
   * `gossipFanout` live members: only where summaries are swapped at all (more members than we hold).
   */
  private passHints(
    live: readonly NodeId[],
    announce: boolean,
    queueDepth: number,
    pushBackMs: number,
    out: Effect[],
  ): void {
    const hints = this.hints;
    if (hints === undefined || this.members.size <= this.maxHeld || live.length === 0) return;
    // At most one relay per Δpoll / 16 (news held meanwhile shares a later message): a message a hint
    // was dearer in requests.
    if (!announce && this.now - this.hintsAt < this.config.pollMs / 16) return;
    if (announce) hints.announce(this.ownSummary.keys);
    const msg = hints.take();
    if (msg === undefined) return;
    this.hintsAt = this.now;
    for (const t of pickDistinct(live, this.config.gossipFanout, this.deps.random))
      this.send(t, msg, queueDepth, pushBackMs, out);
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
      this.onSummary(from, msg, queueDepth, pushBackMs, out);
      return;
    }
    if (msg.type === "hints") {
      if (this.hintLimit?.allow(from, now) === false) return;
      // What is news here goes on now if no relay left in the last Δpoll / 16, else with the next
      // hints message or round (no timer flushes it): a hop mostly costs a network delay, not a round.
      for (const g of msg.groups)
        if (this.members.has(g.holder)) for (const k of g.keys) this.hints?.learn(k, g.holder);
      this.passHints(this.live?.ids ?? NO_IDS, false, queueDepth, pushBackMs, out);
      return;
    }
    if (msg.type === "digest") for (const e of msg.entries) this.sawEpoch(e.owner, e.epoch);
    else for (const st of msg.states) this.sawEpoch(st.snapshot.header.sender, st.snapshot.header.epoch);
    if (msg.type === "digest" && msg.load !== undefined) this.loadReported(from, msg.load);
    // A summary we lack (or hold at another tag) of a member we hold no estimate of (an estimate says
    // more): asked for, with our tag (the exchange runs both ways).
    if (
      msg.type === "digest" &&
      msg.summary !== undefined &&
      this.members.size > this.maxHeld &&
      !this.sb.holds(from) &&
      this.summaries?.wants(from, msg.summary)
    )
      this.send(from, { type: "summary", want: true, tag: this.ownSummary.tag }, queueDepth, pushBackMs, out);
    const answer = this.sb.onMessage(from, msg, own);
    if (answer !== undefined) this.send(from, answer, queueDepth, pushBackMs, out);
    const next = this.sb.continueRound(from, own);
    if (next !== undefined && this.members.has(next.to))
      this.send(next.to, next.msg, queueDepth, pushBackMs, out);
    this.scheduleSteps(out);
  }

  /**
   * A summary exchange: a body is learnt; a want is answered with ours, asking for theirs in turn only
   * when the want came without a body (so an exchange ends after at most three messages).
   */
  private onSummary(
    from: NodeId,
    msg: SummaryMessage,
    queueDepth: number,
    pushBackMs: number,
    out: Effect[],
  ): void {
    const idx = this.summaries;
    if (idx === undefined) return;
    if (msg.keys !== undefined) {
      idx.set(from, msg.tag, msg.keys);
      // What its summary no longer lists it no longer holds (evicted): hints saying so are stale.
      this.hints?.retain(from, msg.keys);
      for (const k of msg.keys) this.hints?.learn(k, from);
    }
    if (!msg.want) return;
    const own = this.ownSummary;
    const want = msg.keys === undefined && idx.wants(from, msg.tag);
    this.send(from, { type: "summary", want, tag: own.tag, keys: own.keys }, queueDepth, pushBackMs, out);
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
    const idx = this.summaries;
    const hints = this.hints;
    if (idx === undefined || hints === undefined || now - this.seekAt < this.config.pollMs / 8) return;
    if (idx.size === 0 && hints.keys === 0) return;
    const tokens = keyTokens(request);
    const keys = blockKeys(tokens, Math.min(tokens.length, SUMMARY_MAX_BLOCKS * BLOCK_SIZE));
    let best = selfMatch;
    const m = this.sb.index.matchAll(tokens);
    for (let i = 0; i < m.owners.length; i++) best = Math.max(best, m.lengths[i] as number);
    const fit: NodeId[] = [];
    for (const [blocks, key] of checkpoints(keys)) {
      if (blocks * BLOCK_SIZE <= best) return;
      for (const h of idx.holders(key)) if (this.members.has(h) && !this.sb.holds(h)) fit.push(h);
      for (const h of hints.holders(key))
        if (this.members.has(h) && !this.sb.holds(h) && !fit.includes(h)) fit.push(h);
      if (fit.length === 0) continue;
      const owner = fit[Math.floor(this.deps.random() * fit.length)] as NodeId;
      // A refused seek counts too: the rate bound holds whatever the outcome (this is the routing path).
      this.seekAt = now;
      const msg = this.sb.seek(owner);
      if (msg === undefined) return;
      this.now = now;
      this.useful.set(owner, Math.max(1, this.useful.get(owner) ?? 0));
      // A seed (not an update: the index holds no estimate of it yet), replaced by its state.
      const seed = Float64Array.from(keys.slice(0, blocks));
      this.sb.index.replaceEstimate(owner, { blockSize: BLOCK_SIZE, keys: seed });
      this.sb.polluted(owner);
      this.guessedAt.set(owner, now);
      this.send(owner, msg, queueDepth, pushBackMs, out);
      return;
    }
  }

  /** A message to a member; a digest carries our load as we send it (its partner's view of our queue). */
  private send(to: NodeId, msg: MeshGossip, queueDepth: number, pushBackMs: number, out: Effect[]): void {
    const m: MeshGossip =
      msg.type === "digest"
        ? {
            ...msg,
            load: { queueDepth, pushBackMs },
            ...(this.summaries === undefined ? {} : { summary: this.ownSummary.tag }),
          }
        : msg;
    out.push({ type: "mesh-send", to, msg: { channel: "gossip", msg: m } });
  }

  /**
   * A member's load from its own digest: fresher than the header of its newest state, which changes
   * only with its tree. Only for a member we hold an estimate of (we route to no other).
   */
  private loadReported(from: NodeId, load: DigestLoad): void {
    const l = this.loads.get(from);
    if (l === undefined) return;
    l.queueDepth = load.queueDepth;
    l.queueAt = this.now;
    l.pushBackUntil = pushBackUntil(this.now, load.pushBackMs, this.config.maxPushBackMs);
    this.reported.add(from);
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
  onSnapshot(): { reported: boolean; restarted: boolean } {
    return { reported: false, restarted: false };
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

  /**
   * `owner` at `epoch`, as a digest or state from a member said. Epochs only grow, so a strictly newer
   * one than we knew is a restart — one SWIM never saw when the member came back within its suspicion
   * time: its cache is empty (every hint naming it stale), and the forwards and hedges waiting on it
   * are lost (its duplicate window went with it). The first epoch we see of a member is no news.
   * It may be a stale one a relay still carries, and then the member's current epoch reads as a
   * restart: node.ts fails over only what its acks show an older incarnation took
   * (forward-attempts.ts `lostTo`).
   */
  private sawEpoch(owner: NodeId, epoch: number): void {
    if (owner === this.selfId || !this.members.has(owner)) return;
    const was = this.epochs.get(owner);
    if (was !== undefined && epoch <= was) return;
    this.epochs.set(owner, epoch);
    if (was === undefined) return;
    this.hints?.remove(owner);
    this.restarted.add(owner);
  }

  private applied(h: SnapshotHeader): void {
    this.reported.add(h.sender);
    this.sawEpoch(h.sender, h.epoch);
    let l = this.loads.get(h.sender);
    if (l === undefined) {
      l = { ...NO_LOAD };
      this.loads.set(h.sender, l);
    }
    l.queueDepth = h.queueDepth;
    l.queueAt = this.now;
    l.capacityTokens = h.capacity;
    l.pushBackUntil = pushBackUntil(this.now, h.pushBackMs, this.config.maxPushBackMs);
    // Its speed (advertiseCosts), relayed or not: routing and push-back compare queues by it. A newer
    // header without costs (its owner restarted uncalibrated, or stopped advertising) clears them;
    // only newer states apply, so an older header (relays carry them as is) never puts them back.
    l.costs = h.costs;
    l.estimateAt = this.now;
    l.treeTokens = h.tokenCount;
  }

  /**
   * Our state as the gossip reads it. Kept while nothing in it moved (a header travels inside the
   * states we send, so a changed one is a new object, never an edit): one per gossip message was a
   * header and four closures of garbage each time.
   */
  private own(tree: OwnTree, queueDepth: number, pushBackMs: number): OwnState {
    const o = this.ownState;
    const h = o?.header();
    if (
      o !== undefined &&
      h !== undefined &&
      this.ownTree === tree &&
      h.epoch === this.epoch &&
      h.version === tree.version &&
      h.tokenCount === tree.size &&
      h.capacity === tree.capacity &&
      h.queueDepth === queueDepth &&
      h.pushBackMs === pushBackMs
    )
      return o;
    const header: SnapshotHeader = {
      sender: this.selfId,
      epoch: this.epoch,
      version: tree.version,
      tokenCount: tree.size,
      capacity: tree.capacity,
      queueDepth,
      pushBackMs,
    };
    this.ownTree = tree;
    if (this.summaries !== undefined) this.ownSummary.refresh(tree);
    this.ownState = {
      header: () => header,
      blocks: () => tree.blockCount,
      changesSince: (v) => tree.changesSince(v),
      snapshotBody: () => tree.snapshotBody(),
    };
    return this.ownState;
  }
}
