/**
 * PrefixNode: one peer of the mesh as a pure state machine — the paper's Algorithm 1 plus §3
 * (anti-entropy, failure detection, push-back, forward fallback). See types.ts for the contract with
 * the runtime (simulator or daemon). Every method returns the effects to perform; nothing else leaves.
 *
 * Request life at the origin: route (policy over local state only) → forward to the best peer, with a
 * timeout → on result reply + `updateTrieEstimate` (line 17); on timeout / error / the target being
 * suspected or restarting → the next candidate → finally local execution. A request is answered
 * exactly once: replies that arrive after we moved on are dropped and counted (`lateReplies`).
 * Moving on also sends the abandoned target a `cancel`, so it drops the job if it has not started it:
 * a fallback then costs one computation, not two.
 *
 * Forward acks (bounded latency under message loss and silent partitions): the receiver of a forward
 * answers `forward-ack` at once, with its ETA. The origin abandons an attempt that is not acked within
 * the ack timeout (max(floor, 4 × RTT)) exactly like a timed-out one, instead of waiting the whole
 * forward timeout. Once acked, it waits for the answer until ETA-based probe time; then it re-sends the
 * same forward (a probe: idempotent at the receiver, which acks again or re-sends its lost answer) and
 * again needs an ack in time. The forward timeout stays the hard bound of every attempt.
 */
import { BLOCK_SIZE, BlockHasher } from "../block-hash.js";
import type { EngineRequest, EngineResult, Tokens } from "../engine.js";
import { Estimates } from "../estimates.js";
import { PeerIndex } from "../peer-index.js";
import { type LockHandle, RadixTree } from "../radix-tree.js";
import type { Snapshot, SnapshotHeader } from "../snapshot.js";
import { type NodeConfig, type NodeConfigInput, nodeId, resolveNodeConfig } from "./config.js";
import { type LearnedCosts, PrefillFit } from "./cost-model.js";
import { PrefixDemand } from "./demand.js";
import { Membership, type PeerState } from "./membership.js";
import { createPolicy, type Policy, type PolicyName } from "./policies/index.js";
import { buildCandidates } from "./routing.js";
import type {
  Effect,
  NodeDeps,
  NodeId,
  NodeInput,
  NodeStats,
  PeerMessage,
  PeerView,
  ReplyErrorCode,
  RequestRecord,
  ServedTiming,
  SnapshotEcho,
  Timer,
} from "./types.js";

/** The ack timeout is at least this many smoothed RTTs (TCP's RTO allows SRTT + 4 × RTTVAR). */
const ACK_RTT_FACTOR = 4;
/** A peer is taken for one that does not ack after this many answers to unacked attempts in a row. */
const MISSED_ACKS_TO_EXEMPT = 3;
/** Answers kept to re-send to an origin probing for one it lost (also dropped after forwardTimeoutMs). */
const MAX_RECENT_ANSWERS = 256;
/** Attempts abandoned for want of an ack, remembered to notice a peer that answers but never acks. */
const MAX_UNACKED_ABANDONED = 256;
/** Longest request id accepted from a peer (ids are stored in maps and echoed back). */
const MAX_REQ_ID = 512;
/** Per engine run: eviction pressure remembers ≈ 50 runs. */
const PRESSURE_DECAY = 0.98;
/** Prefix keys whose demand an origin tracks (LRU beyond). */
const DEMAND_KEYS = 4096;
/** Unconfirmed sends remembered per peer (older ones are forgotten; the window check still holds). */
const MAX_UNCONFIRMED = 64;
/**
 * A forward is refused only when its expected wait exceeds the origin's budget by this factor: the
 * refused request goes to the origin's own (often as long) queue with a cache miss, so only sure
 * timeouts are worth refusing (measured in BENCHMARKS.md: without the margin, mean latency at 10 req/s
 * got worse).
 */
const DEADLINE_SLACK = 1.25;

/** A request this node originated (a client sent it here) and has not answered yet. */
interface Pending {
  reqId: string;
  request: EngineRequest;
  receivedAt: number;
  /** Peers to try, best first (the policy's order up to self). */
  plan: NodeId[];
  next: number;
  attempt: number;
  target: NodeId;
  /** The peer of the current forward attempt; undefined once the request runs (or queues) here. */
  current: NodeId | undefined;
  attemptSentAt: number;
  predicted: number;
  fallbacks: number;
  /**
   * `probes` when the current attempt's target last confirmed it holds it (`forward-ack`); -1 if it
   * never did. The latest send is acked iff it equals `probes` (a probe needs a new ack).
   */
  ackedAt: number;
  /** The ack timer is armed (so a fallback cancels it). */
  ackArmed: boolean;
  /** Re-sends of the current attempt (each doubles the wait before the next one). */
  probes: number;
}

/** A request waiting for or running on this node's engine. */
interface Job {
  jobId: string;
  kind: "client" | "forward";
  /** The origin's request id. */
  reqId: string;
  from: NodeId | undefined;
  attempt: number;
  request: EngineRequest;
  enqueuedAt: number;
  startedAt: number;
  handle: LockHandle | undefined;
  matched: number;
  cacheTokens: number;
  /** Cancelled by its origin while queued: skipped when its turn comes. */
  cancelled: boolean;
}

export interface NodeOptions {
  /** Start epoch; default `deps.now()`. Must grow across restarts of the same id. */
  epoch?: number;
}

function emptyStats(): NodeStats {
  return {
    clientRequests: 0,
    servedLocal: 0,
    servedForPeers: 0,
    forwarded: 0,
    fallbacks: 0,
    lateReplies: 0,
    duplicateForwards: 0,
    cancelledForwards: 0,
    ackTimeouts: 0,
    probes: 0,
    resends: 0,
    resentAnswers: 0,
    ignoredAcks: 0,
    rejectedDeadline: 0,
    rejectedOverload: 0,
    engineFailures: 0,
    unknownSender: 0,
    invalidMessages: 0,
    snapshotsSent: { full: 0, delta: 0, heartbeat: 0 },
    snapshotsReceived: { applied: 0, stale: 0, duplicate: 0, needFull: 0, invalid: 0 },
    evictedTokens: 0,
  };
}

export class PrefixNode {
  readonly config: NodeConfig;
  private policy: Policy;
  private epoch = 0;
  private tree!: RadixTree;
  private index!: PeerIndex;
  private estimates!: Estimates;
  private members!: Membership;
  private readonly pending = new Map<string, Pending>();
  private readonly queue: Job[] = [];
  private queueHead = 0;
  private readonly running = new Map<string, Job>();
  /** Forward ids seen (true), or cancelled before their forward arrived (false: drop it then). */
  private readonly seenForwards = new Map<string, boolean>();
  /** Forwards waiting in the queue, by forward key: what a `cancel` can still drop. */
  private readonly queuedForwards = new Map<string, Job>();
  /** Cancelled jobs still in the queue array (not counted as depth). */
  private cancelledQueued = 0;
  /** Answers we sent for forwards, by forward key, to re-send to a probing origin (bounded). */
  private readonly recentAnswers = new Map<string, { msg: PeerMessage; at: number }>();
  /** Our attempts abandoned for want of an ack, by reqId + attempt → the peer (bounded). */
  private readonly unackedAbandoned = new Map<string, NodeId>();
  /** Peers added at run time that get our full state at the next anti-entropy tick, live or not. */
  private readonly joined = new Set<NodeId>();
  private jobSeq = 0;
  /** Logical LRU clock for the tree: strictly increasing per insert. */
  private tick = 0;
  /** Tokens promised to running jobs (concurrency > 1) so they cannot over-commit the capacity. */
  private reserved = 0;
  private serviceMsEwma: number | undefined;
  /** Learned from our own engine results; kept across restart() (the machine did not change). */
  private readonly prefillFit: PrefillFit;
  /** Arrivals per prefix at this origin (cost-aware's rent-or-buy); bounded. */
  private readonly demand: PrefixDemand;
  private readonly hasher = new BlockHasher();
  /**
   * Decayed tokens inserted into / evicted from our cache: their ratio is the eviction pressure. A
   * prefix bought under full pressure only displaces another, so rent-or-buy discounts by it.
   */
  private insertedDecayed = 0;
  private evictedDecayed = 0;
  private stats_: NodeStats = emptyStats();

  constructor(
    config: NodeConfigInput,
    private readonly deps: NodeDeps,
    opts: NodeOptions = {},
  ) {
    this.config = resolveNodeConfig(config);
    this.policy = createPolicy(this.config.policy);
    this.prefillFit = new PrefillFit(this.config.costPrior, this.config.costDecay);
    this.demand = new PrefixDemand(DEMAND_KEYS, this.config.demandPrior);
    this.reset(Math.floor(opts.epoch ?? deps.now()));
  }

  private reset(epoch: number): void {
    this.epoch = epoch;
    this.tree = new RadixTree({ capacity: this.config.capacityTokens });
    this.index = new PeerIndex({ maxOwners: this.maxPeers() + 1 });
    this.estimates = new Estimates(this.index);
    // A restart keeps the current membership (peers added or removed at run time included).
    const ids = this.members === undefined ? this.config.peers : this.members.all().map((p) => p.id);
    this.joined.clear();
    this.members = new Membership(ids, this.config.suspectAfterPolls * this.config.pollMs, this.deps.now());
    this.pending.clear();
    this.queue.length = 0;
    this.queueHead = 0;
    this.running.clear();
    this.seenForwards.clear();
    this.queuedForwards.clear();
    this.cancelledQueued = 0;
    this.recentAnswers.clear();
    this.unackedAbandoned.clear();
    this.reserved = 0;
  }

  // ---------------------------------------------------------------- lifecycle

  /** Arms the anti-entropy timer. Call once before feeding inputs. */
  start(): Effect[] {
    return [{ type: "set-timer", timer: { kind: "poll" }, delayMs: this.pollDelay() }];
  }

  /**
   * Crash-recovery (§2): the cache is gone, a new epoch starts, peers will replace our estimate.
   * Pending client requests are lost with the crash (the runtime fails their connections).
   */
  restart(epoch?: number): Effect[] {
    // Epochs are whole, strictly increasing numbers (they go on the wire).
    const next = Math.max(Math.floor(epoch ?? this.deps.now()), this.epoch + 1);
    this.stats_ = emptyStats();
    this.reset(next);
    return this.start();
  }

  /** Graceful leave: tell every peer so they stop routing here at once. */
  goodbye(): Effect[] {
    return this.members.all().map((p) => ({ type: "send", to: p.id, msg: { type: "goodbye" } }) as Effect);
  }

  /** Switch routing policy at run time (e.g. the daemon's compare-policies admin endpoint). */
  setPolicy(name: PolicyName): void {
    this.policy = createPolicy(name);
  }

  // ---------------------------------------------------------------- dynamic membership

  /** Most peers at once (`maxPeers`; default the static list's size). */
  maxPeers(): number {
    return this.config.maxPeers ?? this.config.peers.length;
  }

  /**
   * Adds a peer at run time (e.g. found by DNS and verified by the runtime). It starts unknown — not
   * routed to until it speaks — and gets our full state at the next anti-entropy tick. Returns false
   * (nothing changes) for our own id, an invalid id, a current member, or a full membership.
   */
  addPeer(id: NodeId): boolean {
    if (id === this.config.id || !nodeId.safeParse(id).success) return false;
    if (this.members.get(id) !== undefined || this.members.size >= this.maxPeers()) return false;
    this.members.add(id, this.deps.now());
    this.joined.add(id);
    return true;
  }

  /**
   * Removes a peer at run time (gone from DNS, or its address now answers with another id): its
   * estimate is dropped, it is no longer routed or gossiped to, and forwards waiting on it fail over
   * to their next candidate at once (its late answers are then ignored and counted, as from any
   * non-member, so each request is still answered exactly once).
   */
  removePeer(id: NodeId): Effect[] {
    const out: Effect[] = [];
    if (!this.members.remove(id)) return out;
    this.joined.delete(id);
    this.estimates.remove(id);
    this.failPendingTo(id, this.deps.now(), out);
    return out;
  }

  handle(input: NodeInput): Effect[] {
    const out: Effect[] = [];
    switch (input.type) {
      case "client-request":
        this.onClientRequest(input.reqId, input.request, out);
        break;
      case "peer-message":
        this.onPeerMessage(input.from, input.msg, out);
        break;
      case "engine-done":
        this.onEngineDone(input.jobId, input.result, out);
        break;
      case "engine-failed":
        this.onEngineFailed(input.jobId, input.error, out);
        break;
      case "timer":
        this.onTimer(input.timer, out);
        break;
      case "send-failed":
        this.onSendFailed(input.to, input.msg, out);
        break;
    }
    return out;
  }

  // ---------------------------------------------------------------- read-only views

  get id(): NodeId {
    return this.config.id;
  }
  get currentEpoch(): number {
    return this.epoch;
  }
  get policyName(): string {
    return this.policy.name;
  }
  queueDepth(): number {
    return this.queue.length - this.queueHead - this.cancelledQueued + this.running.size;
  }
  treeSize(): number {
    return this.tree.size;
  }
  treeVersion(): number {
    return this.tree.version;
  }
  stats(): Readonly<NodeStats> {
    return this.stats_;
  }
  /** The exact local tree (tests and invariant checks only: do not mutate). */
  localTree(): RadixTree {
    return this.tree;
  }
  /** The peer estimates (tests and invariant checks only: do not mutate). */
  peerIndex(): PeerIndex {
    return this.index;
  }
  heldOf(peer: NodeId): { epoch: number; version: number } | undefined {
    return this.estimates.held(peer);
  }
  /**
   * Whose output a client request of ours waits for now: the peer of its current forward attempt, this
   * node once it runs (or queues) here; undefined when it is not pending. Output from any other node
   * belongs to an attempt we moved on from.
   */
  servingNow(reqId: string): NodeId | undefined {
    const p = this.pending.get(reqId);
    if (!p) return undefined;
    return p.current ?? this.config.id;
  }
  peers(): PeerView[] {
    const now = this.deps.now();
    return this.members.all().map((p) => ({
      id: p.id,
      liveness: this.members.liveness(p, now),
      silentMs: p.lastHeard === undefined ? undefined : now - p.lastHeard,
      held: this.estimates.held(p.id),
      estimateTokens: this.index.estimateSize(p.id),
      queueDepth: p.queueDepth,
      pushBackUntil: p.pushBackUntil > now ? p.pushBackUntil : 0,
      rttMs: p.rttMs,
      holdsOfUs: p.holdsOfUs,
      acksForwards: p.acksForwards,
    }));
  }
  /** The costs this node has learned (what cost-aware routing sees). */
  learnedCosts(): LearnedCosts {
    const f = this.prefillFit.fit();
    return {
      prefillFixedMs: f.fixedMs,
      prefillMsPerToken: f.msPerToken,
      // Until a run is timed, the service time of an uncached prompt of typical length.
      serviceMs: this.serviceMsEwma ?? f.fixedMs + f.msPerToken * 1000,
      rttPriorMs: this.config.costPrior.rttMs,
      samples: this.prefillFit.samples,
    };
  }

  /** Push-back we would advertise now (ms; 0 = none). */
  currentPushBackMs(): number {
    const depth = this.queueDepth();
    if (depth <= this.config.pushBackQueueThreshold) return 0;
    if (this.config.pushBackMs > 0) return Math.ceil(this.config.pushBackMs);
    // Expected time for the excess queue to drain at the measured service time (whole ms: wire field).
    const service = this.serviceMsEwma ?? this.config.pollMs;
    return Math.max(1, Math.ceil((depth - this.config.pushBackQueueThreshold) * service));
  }

  // ---------------------------------------------------------------- client requests (Algorithm 1)

  private onClientRequest(reqId: string, request: EngineRequest, out: Effect[]): void {
    const now = this.deps.now();
    this.stats_.clientRequests++;
    if (this.pending.has(reqId)) {
      // The runtime must use unique ids; answering would be ambiguous, so refuse this one only.
      out.push(this.failReply(reqId, request, now, "duplicate request id", "invalid"));
      return;
    }
    if (request.tokens.length === 0 || request.tokens.length > this.config.maxPromptTokens) {
      const why =
        request.tokens.length === 0
          ? "empty prompt"
          : `prompt longer than ${this.config.maxPromptTokens} tokens`;
      out.push(this.failReply(reqId, request, now, why, "invalid"));
      return;
    }
    const selfMatch = this.tree.match(request.tokens);
    const plan: NodeId[] = [];
    let target = this.config.id;
    let predicted = selfMatch;
    if (!this.policy.localOnly) {
      const candidates = buildCandidates(this.members, this.index, request.tokens, now, {
        id: this.config.id,
        match: selfMatch,
        queueDepth: this.queueDepth(),
        capacityTokens: this.tree.capacity,
      });
      const expectedReuse = this.policy.usesDemand
        ? this.recordDemand(request.tokens, candidates)
        : undefined;
      const order =
        candidates.length === 1
          ? [0]
          : this.policy.rank(candidates, {
              promptTokens: request.tokens.length,
              now,
              random: this.deps.random,
              costs: this.learnedCosts(),
              expectedReuse,
            });
      for (const i of order) {
        const c = candidates[i];
        if (!c || c.self) break;
        plan.push(c.id);
      }
      const first = candidates[order[0] ?? 0];
      if (first) {
        target = first.id;
        predicted = first.estimatedMatch;
      }
    }
    const p: Pending = {
      reqId,
      request,
      receivedAt: now,
      plan,
      next: 0,
      attempt: 0,
      target,
      current: undefined,
      attemptSentAt: now,
      predicted,
      fallbacks: 0,
      ackedAt: -1,
      ackArmed: false,
      probes: 0,
    };
    this.pending.set(reqId, p);
    this.advance(p, now, out);
  }

  /**
   * Counts this arrival against the longest prefix any candidate holds (block-aligned, keyed by its
   * chained block key) and returns how often that prefix is expected to come back here
   * (cost-aware's rent-or-buy, demand.ts).
   */
  private recordDemand(
    tokens: Tokens,
    candidates: readonly { estimatedMatch: number; self: boolean }[],
  ): number | undefined {
    let best = 0;
    let own = 0;
    for (const c of candidates) {
      if (c.estimatedMatch > best) best = c.estimatedMatch;
      if (c.self) own = c.estimatedMatch;
    }
    // Only a prefix we mostly LACK is worth buying. When we hold most of it, the peer's extra is a
    // one-off tail (e.g. a repeated question after a shared prefix), whose reuse the prefixes'
    // learned mean would wildly overstate: then plain expected latency decides.
    if (best - own <= best / 2) return undefined;
    const blocks = Math.floor(Math.min(best, tokens.length) / BLOCK_SIZE);
    if (blocks === 0) return undefined;
    this.hasher.reset();
    let key = 0;
    for (let b = 0; b < blocks; b++) key = this.hasher.next(tokens, b * BLOCK_SIZE);
    const seen = this.demand.record(key) + 1;
    const pressure = this.insertedDecayed > 0 ? Math.min(1, this.evictedDecayed / this.insertedDecayed) : 0;
    return this.demand.expectedFuture(seen) * (1 - pressure);
  }

  /** Next step of a pending request: forward to the next routable planned peer, else run locally. */
  private advance(p: Pending, now: number, out: Effect[]): void {
    while (p.next < p.plan.length) {
      const to = p.plan[p.next++] as NodeId;
      const peer = this.members.get(to);
      // The first choice was routable a moment ago; later ones are re-checked (state may have moved).
      if (!peer || !this.members.routable(peer, now, this.queueDepth())) continue;
      p.attempt++;
      p.current = to;
      p.attemptSentAt = now;
      p.ackedAt = -1;
      p.probes = 0;
      peer.sentSinceQueue++;
      this.stats_.forwarded++;
      this.sendForward(p, peer, now, out);
      out.push({
        type: "set-timer",
        timer: { kind: "forward", reqId: p.reqId, attempt: p.attempt },
        delayMs: this.config.forwardTimeoutMs,
      });
      return;
    }
    // No peer attempt left (current undefined from now on): the request runs here.
    p.current = undefined;
    this.enqueue("client", p.reqId, undefined, p.attempt, p.request, now, out);
  }

  /**
   * Sends the current attempt's forward (first send or probe) and, if the peer acks, arms the wait
   * for its ack.
   */
  private sendForward(p: Pending, peer: PeerState, now: number, out: Effect[]): void {
    // The budget the target has: what is left of our timeout less the round trip the answer needs.
    const left = this.config.forwardTimeoutMs - (now - p.attemptSentAt);
    const deadlineMs = Math.max(0, Math.floor(left - (peer.rttMs ?? 0)));
    out.push({
      type: "send",
      to: peer.id,
      msg: { type: "forward", reqId: p.reqId, attempt: p.attempt, hops: 1, request: p.request, deadlineMs },
    });
    const ackMs = this.ackTimeoutMs(peer);
    // An ack timeout as long as the forward timeout adds nothing: acks are then not waited for.
    p.ackArmed = peer.acksForwards && ackMs < this.config.forwardTimeoutMs;
    if (p.ackArmed) out.push({ type: "set-timer", timer: ackTimer(p), delayMs: ackMs });
  }

  /** How long an attempt may go unacked: max(floor, 4 × RTT), at most the forward timeout. */
  ackTimeoutMs(peer: { rttMs: number | undefined }): number {
    const rtt = peer.rttMs ?? this.config.costPrior.rttMs;
    return Math.min(
      this.config.forwardTimeoutMs,
      Math.max(this.config.forwardAckTimeoutMs, ACK_RTT_FACTOR * rtt),
    );
  }

  /** The ack of the current attempt, or of a probe, is not needed any more. */
  private disarmAck(p: Pending, out: Effect[]): void {
    if (!p.ackArmed) return;
    p.ackArmed = false;
    out.push({ type: "cancel-timer", timer: ackTimer(p) });
  }

  /**
   * The current forward attempt failed: count it and move on. `cancel` tells the abandoned target to
   * drop the job if still queued (timeout, suspicion, send failure: it may hold it yet); not sent when
   * it answered an error, departed, restarted or left the membership (nothing to drop, or nobody).
   */
  private fallback(p: Pending, now: number, out: Effect[], cancelTimer: boolean, cancel = true): void {
    if (cancelTimer) out.push({ type: "cancel-timer", timer: forwardTimer(p) });
    this.disarmAck(p, out);
    if (cancel && p.current !== undefined)
      out.push({ type: "send", to: p.current, msg: { type: "cancel", reqId: p.reqId, attempt: p.attempt } });
    p.fallbacks++;
    this.stats_.fallbacks++;
    this.advance(p, now, out);
  }

  private failReply(
    reqId: string,
    request: EngineRequest,
    now: number,
    error: string,
    code: ReplyErrorCode,
    p?: Pending,
  ): Effect {
    const record: RequestRecord = {
      reqId,
      origin: this.config.id,
      target: p?.target ?? this.config.id,
      servedBy: undefined,
      hops: 0,
      fallbacks: p?.fallbacks ?? 0,
      policy: this.policy.name,
      promptTokens: request.tokens.length,
      predictedHitTokens: p?.predicted ?? 0,
      actualHitTokens: 0,
      queueMs: 0,
      prefillMs: 0,
      decodeMs: 0,
      networkMs: 0,
      totalMs: now - (p?.receivedAt ?? now),
      receivedAt: p?.receivedAt ?? now,
      finishedAt: now,
    };
    return { type: "reply", reqId, outcome: { ok: false, error, code }, record };
  }

  private okReply(p: Pending, result: EngineResult, timing: ServedTiming, hops: number, now: number): Effect {
    const totalMs = now - p.receivedAt;
    const record: RequestRecord = {
      reqId: p.reqId,
      origin: this.config.id,
      target: p.target,
      servedBy: timing.servedBy,
      hops,
      fallbacks: p.fallbacks,
      policy: this.policy.name,
      promptTokens: p.request.tokens.length,
      predictedHitTokens: p.predicted,
      actualHitTokens: result.cachedTokens,
      queueMs: timing.queueMs,
      prefillMs: timing.prefillMs,
      decodeMs: timing.decodeMs,
      networkMs: Math.max(0, totalMs - timing.queueMs - timing.prefillMs - timing.decodeMs),
      totalMs,
      receivedAt: p.receivedAt,
      finishedAt: now,
    };
    return { type: "reply", reqId: p.reqId, outcome: { ok: true, result }, record };
  }

  // ---------------------------------------------------------------- peer messages

  private onPeerMessage(from: NodeId, msg: PeerMessage, out: Effect[]): void {
    const peer = this.members.get(from);
    if (!peer) {
      this.stats_.unknownSender++;
      return;
    }
    const now = this.deps.now();
    this.members.heard(peer, now);
    switch (msg.type) {
      case "snapshot":
        this.onEcho(peer, msg.at, msg.echo, now);
        this.onSnapshot(peer, msg.snapshot, msg.holds, msg.blocks, now, out);
        break;
      case "forward":
        this.onForward(peer, msg.reqId, msg.attempt, msg.hops, msg.request, msg.deadlineMs, now, out);
        break;
      case "forward-ack":
        this.onForwardAck(peer, msg.reqId, msg.attempt, msg.etaMs, out);
        break;
      case "cancel":
        this.onCancel(peer, msg.reqId, msg.attempt, out);
        break;
      case "result":
        this.onResult(peer, msg.reqId, msg.attempt, msg.result, msg.timing, now, out);
        break;
      case "error": {
        const p = this.pending.get(msg.reqId);
        if (!p || p.current !== from || p.attempt !== msg.attempt) {
          this.stats_.lateReplies++;
          this.onLateAnswer(peer, msg.reqId, msg.attempt);
          return;
        }
        // The peer (or the stream carrying its answer) ended this attempt itself: nothing to cancel.
        this.fallback(p, now, out, true, false);
        break;
      }
      case "goodbye":
        peer.departed = true;
        this.estimates.remove(from);
        this.failPendingTo(from, now, out);
        break;
    }
  }

  /**
   * The RTT echo (types.ts): remember the peer's send time for our next echo, and time the round
   * trip our last echoed snapshot made. Peer-supplied numbers: anything non-finite, negative or
   * longer than a forward may take is ignored, so a bad peer can only bound-limit its own RTT.
   */
  private onEcho(peer: PeerState, at: number | undefined, echo: SnapshotEcho | undefined, now: number): void {
    if (typeof at === "number" && Number.isFinite(at)) {
      peer.echoT = at;
      peer.echoRxAt = now;
    }
    if (echo === undefined) return;
    const { t, heldMs } = echo;
    if (!Number.isFinite(t) || !Number.isFinite(heldMs) || heldMs < 0) return;
    const rtt = now - t - heldMs;
    if (rtt >= 0 && rtt <= this.config.forwardTimeoutMs) this.members.sampleRtt(peer, rtt);
  }

  private onSnapshot(
    peer: PeerState,
    s: Snapshot,
    holds: { epoch: number; version: number } | undefined,
    blocks: number | undefined,
    now: number,
    out: Effect[],
  ): void {
    const h = s.header;
    if (h.sender !== peer.id) {
      this.stats_.snapshotsReceived.invalid++;
      return;
    }
    const restarted = peer.epoch !== undefined && h.epoch > peer.epoch;
    const verdict = this.estimates.apply(s);
    const rx = this.stats_.snapshotsReceived;
    if (verdict === "applied") rx.applied++;
    else if (verdict === "duplicate") rx.duplicate++;
    else if (verdict === "need-full") rx.needFull++;
    else rx.stale++;
    if (verdict === "stale") return; // older than what we hold: its load figures are older too
    if (peer.epoch === undefined || h.epoch >= peer.epoch) peer.epoch = h.epoch;
    peer.queueDepth = h.queueDepth;
    peer.queueAt = now;
    peer.sentSinceQueue = 0;
    peer.capacityTokens = h.capacity;
    peer.pushBackUntil = h.pushBackMs > 0 ? now + Math.min(h.pushBackMs, this.config.maxPushBackMs) : 0;
    if (verdict === "need-full") {
      // The update did not fit what we hold. If we hold something, our ack keeps saying what, and the
      // sender falls back to a delta from there once its optimism about the lost send runs out; if
      // we hold nothing of this epoch, ask for the full state at once (omit our ack).
      if ((this.estimates.held(peer.id)?.version ?? 0) === 0) peer.wantFull = true;
    } else {
      // A full snapshot is the truth at its version, even one we "already hold": it also repairs
      // an estimate polluted by a wrong optimistic insert.
      if (verdict === "duplicate" && s.kind === "full") this.index.replaceEstimate(peer.id, s.body);
      peer.estimateAt = now;
      // Optimistic inserts only ever add keys, so a count above the sender's means a wrong guess.
      const held = this.estimates.held(peer.id);
      // A snapshot that overtook the result of our last forward (jitter) may predate the peer's
      // insert: only trust the count once an RTT has passed since that optimistic insert.
      const settled = now - peer.optimisticAt > (peer.rttMs ?? 0) + 1;
      if (blocks !== undefined && held?.epoch === h.epoch && held.version === h.version && settled) {
        peer.wantFull = this.index.estimateSize(peer.id) !== blocks * this.index.blockSize;
      } else if (s.kind === "full") peer.wantFull = false;
    }
    this.onAck(peer, holds, now);
    // A restarted peer lost whatever we had forwarded to it.
    if (restarted) this.failPendingTo(peer.id, now, out);
  }

  private onForward(
    peer: PeerState,
    reqId: string,
    attempt: number,
    hops: number,
    request: EngineRequest,
    deadlineMs: number | undefined,
    now: number,
    out: Effect[],
  ): void {
    if (reqId.length > MAX_REQ_ID) {
      this.stats_.invalidMessages++;
      return;
    }
    const key = forwardKey(peer.id, reqId, attempt);
    const seen = this.seenForwards.get(key);
    if (seen !== undefined) {
      // false: its cancel overtook it; the origin has moved on, so it is dropped, and said so.
      if (seen) {
        this.stats_.duplicateForwards++;
        this.onDuplicateForward(peer.id, key, reqId, attempt, now, out);
      } else {
        this.stats_.cancelledForwards++;
        this.seenForwards.set(key, true);
        out.push(this.forwardDropped(peer.id, reqId, attempt, FORWARD_CANCELLED));
      }
      return;
    }
    this.rememberForward(key, true);
    const reject = (error: string): void => {
      out.push({ type: "send", to: peer.id, msg: { type: "error", reqId, attempt, error, retryable: true } });
    };
    if (hops > this.config.maxHops) {
      reject("hop limit exceeded");
      return;
    }
    if (request.tokens.length === 0 || request.tokens.length > this.config.maxPromptTokens) {
      reject("prompt empty or too long");
      return;
    }
    if (this.queueDepth() >= this.config.maxQueue) {
      this.stats_.rejectedOverload++;
      reject("overloaded");
      return;
    }
    // A peer-controlled number: anything but a finite non-negative budget means "no deadline".
    if (typeof deadlineMs === "number" && Number.isFinite(deadlineMs) && deadlineMs >= 0) {
      const wait = this.expectedWaitMs();
      if (wait !== undefined && wait > deadlineMs * DEADLINE_SLACK) {
        // It could not even start before the origin gives up: it would wait out the whole timeout.
        this.stats_.rejectedDeadline++;
        reject(`deadline: expected to start in ${Math.ceil(wait)} ms, origin waits ${deadlineMs} ms`);
        return;
      }
    }
    // Accepted: ack at once (before any engine work) so the origin knows it need not fall back.
    out.push(this.forwardAck(peer.id, reqId, attempt, request));
    // Served here: never forwarded again (hop limit 1 by default), so no chains or loops.
    this.enqueue("forward", reqId, peer.id, attempt, request, now, out);
  }

  /**
   * The same forward again: a duplicate in the network, or the origin probing for an overdue answer.
   * Never run twice: ack again while it waits or runs, re-send the answer if we already sent one.
   */
  private onDuplicateForward(
    from: NodeId,
    key: string,
    reqId: string,
    attempt: number,
    now: number,
    out: Effect[],
  ): void {
    const queued = this.queuedForwards.get(key);
    if (queued) {
      out.push(this.forwardAck(from, reqId, attempt, queued.request));
      return;
    }
    for (const job of this.running.values()) {
      if (job.kind === "forward" && job.from === from && job.reqId === reqId && job.attempt === attempt) {
        out.push(this.forwardAck(from, reqId, attempt, job.request, now - job.startedAt));
        return;
      }
    }
    const answer = this.config.answerProbes ? this.recentAnswers.get(key) : undefined;
    if (answer && now - answer.at <= this.config.forwardTimeoutMs) {
      this.stats_.resentAnswers++;
      out.push({ type: "send", to: from, msg: answer.msg });
      return;
    }
    // Nothing to send again (answers not kept, or no longer): say so, so the copy ends now — its
    // sender falls back, if it still waits — rather than at its timeout.
    out.push(this.forwardDropped(from, reqId, attempt, DUPLICATE_HANDLED));
  }

  /**
   * The one reply to a forward this node drops without running it (cancelled, or a copy of one
   * already handled): a retryable error, so nothing waits on it — the origin, or a transport stream
   * opened for it — until a timeout.
   */
  private forwardDropped(to: NodeId, reqId: string, attempt: number, error: string): Effect {
    return { type: "send", to, msg: { type: "error", reqId, attempt, error, retryable: true } };
  }

  /**
   * A `forward-ack` for the origin of `request`; with `answerProbes` it carries the ETA (ms) the origin
   * times its probes by — the rest of the run if it has run `ranMs`, else the queue wait plus the
   * run — and without, none: the ETA, a tree match, is not even computed.
   */
  private forwardAck(
    to: NodeId,
    reqId: string,
    attempt: number,
    request: EngineRequest,
    ranMs?: number,
  ): Effect {
    const msg: PeerMessage = { type: "forward-ack", reqId, attempt };
    if (this.config.answerProbes) {
      const eta =
        ranMs === undefined
          ? (this.expectedWaitMs(this.serviceEstimate()) ?? 0) + this.serviceFor(request)
          : Math.max(0, this.serviceFor(request) - ranMs);
      msg.etaMs = Math.ceil(eta);
    }
    return { type: "send", to, msg };
  }

  /** Sends the answer to a forward and keeps it (bounded) for an origin that may lose it. */
  private answerForward(job: Job, msg: PeerMessage, now: number, out: Effect[]): void {
    if (this.config.answerProbes) {
      this.recentAnswers.set(forwardKey(job.from as NodeId, job.reqId, job.attempt), { msg, at: now });
      if (this.recentAnswers.size > MAX_RECENT_ANSWERS) {
        this.recentAnswers.delete(this.recentAnswers.keys().next().value as string);
      }
    }
    out.push({ type: "send", to: job.from as NodeId, msg });
  }

  /** Measured mean service time, or the learned costs' guess before any run. */
  private serviceEstimate(): number {
    return this.serviceMsEwma ?? this.learnedCosts().serviceMs;
  }

  /** Expected service time of `request` here: its uncached prefill, at least the measured mean. */
  private serviceFor(request: EngineRequest): number {
    const prefill = this.prefillFit.predict(request.tokens.length - this.tree.match(request.tokens));
    return Math.max(prefill, this.serviceMsEwma ?? 0);
  }

  /** Remembers a forward key in the bounded dedup window (oldest forgotten first). */
  private rememberForward(key: string, seen: boolean): void {
    if (this.config.dedupWindow === 0) return;
    this.seenForwards.set(key, seen);
    if (this.seenForwards.size > this.config.dedupWindow) {
      const oldest = this.seenForwards.keys().next().value as string;
      this.seenForwards.delete(oldest);
    }
  }

  /**
   * The origin gave up on this attempt: drop it if it is still waiting (counted, answered with
   * nothing — the origin has moved on). A running job finishes; its reply is dropped there as late.
   * A cancel that overtook its forward is remembered so the forward is dropped when it arrives.
   */
  private onCancel(peer: PeerState, reqId: string, attempt: number, out: Effect[]): void {
    if (typeof reqId !== "string" || reqId.length > MAX_REQ_ID) {
      this.stats_.invalidMessages++;
      return;
    }
    const key = forwardKey(peer.id, reqId, attempt);
    const job = this.queuedForwards.get(key);
    if (job) {
      this.queuedForwards.delete(key);
      job.cancelled = true;
      this.cancelledQueued++;
      this.stats_.cancelledForwards++;
      out.push(this.forwardDropped(peer.id, reqId, attempt, FORWARD_CANCELLED));
      return;
    }
    if (!this.seenForwards.has(key)) this.rememberForward(key, false);
  }

  /**
   * How long a job enqueued now would wait before it starts, from the measured service time
   * (undefined until a run is timed). With every slot busy, the running jobs have half a service
   * time left on average and the waiting ones drain `concurrency` at a time.
   */
  private expectedWaitMs(svc = this.serviceMsEwma): number | undefined {
    if (svc === undefined) return undefined;
    const c = this.config.concurrency;
    if (this.running.size < c) return 0;
    const waiting = this.queue.length - this.queueHead - this.cancelledQueued;
    return ((waiting + c / 2) / c) * svc;
  }

  private onResult(
    peer: PeerState,
    reqId: string,
    attempt: number,
    result: EngineResult,
    timing: ServedTiming,
    now: number,
    out: Effect[],
  ): void {
    const p = this.pending.get(reqId);
    if (!p || p.current !== peer.id || p.attempt !== attempt) {
      this.stats_.lateReplies++;
      this.onLateAnswer(peer, reqId, attempt);
      return;
    }
    out.push({ type: "cancel-timer", timer: forwardTimer(p) });
    this.disarmAck(p, out);
    this.pending.delete(reqId);
    // Algorithm 1 line 17: the peer now caches this prompt; believe it until its next snapshot.
    this.index.updateTrieEstimate(peer.id, p.request.tokens);
    peer.optimisticAt = now;
    const remote = timing.queueMs + timing.prefillMs + timing.decodeMs;
    // After a probe the answer may be a re-sent one: its delay is no round trip.
    if (p.probes === 0) this.members.sampleRtt(peer, now - p.attemptSentAt - remote);
    out.push(this.okReply(p, result, { ...timing, servedBy: peer.id }, 1, now));
  }

  /** Every pending forward to `to` fails over now (target departed, restarted or unreachable). */
  private failPendingTo(to: NodeId, now: number, out: Effect[]): void {
    for (const p of this.pending.values()) {
      if (p.current === to) this.fallback(p, now, out, true, false);
    }
  }

  private onSendFailed(to: NodeId, msg: PeerMessage | undefined, out: Effect[]): void {
    const peer = this.members.get(to);
    if (!peer) return;
    peer.failed = true;
    const now = this.deps.now();
    if (msg?.type === "forward") {
      const p = this.pending.get(msg.reqId);
      if (p && p.current === to && p.attempt === msg.attempt) this.fallback(p, now, out, true);
    }
  }

  // ---------------------------------------------------------------- timers

  private onTimer(timer: Timer, out: Effect[]): void {
    const now = this.deps.now();
    if (timer.kind === "poll") {
      this.antiEntropy(now, out);
      // Forwards to peers that went silent need not wait for their full timeout.
      for (const p of this.pending.values()) {
        if (p.current === undefined) continue;
        const peer = this.members.get(p.current);
        if (peer && this.members.liveness(peer, now) !== "live") this.fallback(p, now, out, true);
      }
      out.push({ type: "set-timer", timer: { kind: "poll" }, delayMs: this.pollDelay() });
      return;
    }
    if (timer.kind === "acks") return;
    // A timer of an attempt we have moved on from never acts on the current one.
    const p = this.pending.get(timer.reqId);
    if (p?.current === undefined || p.attempt !== timer.attempt) return;
    if (timer.kind === "forward") this.fallback(p, now, out, false);
    else if (p.ackArmed) this.onAckTimer(p, now, out);
  }

  /**
   * The ack timer of the current attempt fired. Not acked (the forward, its ack, or the probe was
   * lost, or the peer is cut off): abandon the attempt like a timed-out one — cancel, next candidate.
   * Acked but unanswered past its ETA (the answer may be lost): probe by re-sending the same forward.
   */
  private onAckTimer(p: Pending, now: number, out: Effect[]): void {
    p.ackArmed = false;
    const peer = this.members.get(p.current as NodeId);
    const acked = p.ackedAt === p.probes;
    // Probe (re-send the same forward) when the peer acked this round and owes only the answer, or
    // has not acked yet but has resends left; otherwise give up on the peer.
    if (!peer || (!acked && p.probes >= this.config.forwardResends)) {
      this.stats_.ackTimeouts++;
      // Only an attempt never acked may hint at a peer that does not ack.
      if (p.ackedAt < 0 && peer) this.rememberUnacked(p.reqId, p.attempt, peer.id);
      this.fallback(p, now, out, true);
      return;
    }
    p.probes++;
    // Counted apart: a probe asks for an answer the peer owes; a re-send is a forward that may be lost.
    if (acked) this.stats_.probes++;
    else this.stats_.resends++;
    this.sendForward(p, peer, now, out);
  }

  /**
   * A `forward-ack` arrived. Any ack shows the peer acks (so its forwards are held to the ack
   * timeout). For the current, not yet acked attempt: wait for the answer until its ETA (with margin,
   * doubling per probe) before probing; without an ETA, the forward timeout alone bounds the wait.
   */
  private onForwardAck(
    peer: PeerState,
    reqId: string,
    attempt: number,
    etaMs: number | undefined,
    out: Effect[],
  ): void {
    if (typeof reqId !== "string" || reqId.length > MAX_REQ_ID || !Number.isInteger(attempt)) {
      this.stats_.invalidMessages++;
      return;
    }
    peer.acksForwards = true;
    peer.missedAcks = 0;
    this.unackedAbandoned.delete(attemptKey(reqId, attempt));
    const p = this.pending.get(reqId);
    if (!p || p.current !== peer.id || p.attempt !== attempt || p.ackedAt === p.probes) {
      this.stats_.ignoredAcks++;
      return;
    }
    p.ackedAt = p.probes;
    // A peer-controlled number: only a finite, non-negative one counts, and never beyond our timeout.
    const eta =
      typeof etaMs === "number" && Number.isFinite(etaMs) && etaMs >= 0
        ? Math.min(etaMs, this.config.forwardTimeoutMs)
        : undefined;
    if (eta === undefined) {
      this.disarmAck(p, out);
      return;
    }
    const waitMs = Math.min(
      this.config.forwardTimeoutMs,
      (2 * eta + this.ackTimeoutMs(peer)) * 2 ** Math.min(p.probes, 16),
    );
    p.ackArmed = true;
    out.push({ type: "set-timer", timer: ackTimer(p), delayMs: waitMs });
  }

  /** Remembers an attempt abandoned unacked, to notice a peer that answers but never acks. */
  private rememberUnacked(reqId: string, attempt: number, peer: NodeId): void {
    this.unackedAbandoned.set(attemptKey(reqId, attempt), peer);
    if (this.unackedAbandoned.size > MAX_UNACKED_ABANDONED) {
      this.unackedAbandoned.delete(this.unackedAbandoned.keys().next().value as string);
    }
  }

  /**
   * An answer for an attempt we had moved on from. If we had abandoned it for want of an ack, the
   * peer got it but did not ack: after a few such in a row (no ack in between) we stop requiring its
   * acks, so a peer that never acks (an older version) is not penalised on every forward.
   */
  private onLateAnswer(peer: PeerState, reqId: string, attempt: number): void {
    const key = attemptKey(reqId, attempt);
    if (this.unackedAbandoned.get(key) !== peer.id) return;
    this.unackedAbandoned.delete(key);
    if (++peer.missedAcks >= MISSED_ACKS_TO_EXEMPT) peer.acksForwards = false;
  }

  private pollDelay(): number {
    const j = this.config.pollJitter;
    return this.config.pollMs * (1 + j * (2 * this.deps.random() - 1));
  }

  /**
   * One anti-entropy round: every peer gets our header (queue depth, push-back: the heartbeat) and
   * whatever brings its estimate of us up to date — nothing if it holds our current version, a delta
   * from the base it holds when our change log reaches back, else the full tree (§3.4's full-state
   * recovery). Peers we cannot currently reach get a header-only probe until they answer.
   */
  private antiEntropy(now: number, out: Effect[]): void {
    const version = this.tree.version;
    const header: SnapshotHeader = {
      sender: this.config.id,
      epoch: this.epoch,
      version,
      tokenCount: this.tree.size,
      capacity: this.tree.capacity,
      queueDepth: this.queueDepth(),
      pushBackMs: this.currentPushBackMs(),
    };
    let full: Snapshot | undefined;
    let heartbeat: Snapshot | undefined;
    const deltas = new Map<number, Snapshot | null>();
    for (const peer of this.members.all()) {
      const live = this.members.liveness(peer, now);
      let snap: Snapshot | undefined;
      const base = this.baseFor(peer, now);
      // A peer added at run time gets our full state at its first tick, before it has said a word.
      const joined = this.joined.delete(peer.id);
      if (!joined && (live !== "live" || base === version)) {
        heartbeat ??= { kind: "heartbeat", header };
        snap = heartbeat;
      } else if (base !== undefined) {
        let d = deltas.get(base);
        if (d === undefined) {
          const delta = this.tree.changesSince(base);
          d = delta ? { kind: "delta", header, delta } : null;
          deltas.set(base, d);
        }
        if (d) snap = d;
      }
      if (!snap) {
        full ??= { kind: "full", header, body: this.tree.snapshotBody() };
        snap = full;
      }
      if (snap.kind !== "heartbeat") {
        const q = peer.unconfirmed;
        if (q.length === 0 || (q[q.length - 1] as { version: number }).version !== version) {
          q.push({ version, at: now });
          if (q.length > MAX_UNCONFIRMED) q.shift();
        }
      }
      this.stats_.snapshotsSent[snap.kind]++;
      const held = peer.wantFull ? undefined : this.estimates.held(peer.id);
      const msg: PeerMessage = { type: "snapshot", snapshot: snap, blocks: this.tree.blockCount, at: now };
      if (held) msg.holds = held;
      if (peer.echoT !== undefined) msg.echo = { t: peer.echoT, heldMs: now - peer.echoRxAt };
      out.push({ type: "send", to: peer.id, msg });
    }
  }

  /**
   * The peer told us which version of our tree it holds. No ack = "nothing usable" (first contact,
   * restart, or a polluted estimate): forget our optimism so the next round sends a full snapshot.
   */
  private onAck(peer: PeerState, holds: { epoch: number; version: number } | undefined, now: number): void {
    peer.holdsOfUs = holds;
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
   * version — usually still within our change log, so a delta rather than a full snapshot.
   */
  private baseFor(peer: PeerState, now: number): number | undefined {
    const ack = peer.holdsOfUs;
    const acked = ack !== undefined && ack.epoch === this.epoch ? ack.version : undefined;
    const q = peer.unconfirmed;
    if (q.length > 0) {
      const poll = this.config.pollMs * (1 + this.config.pollJitter);
      // Before any ack has been timed, guess from k and the forward RTT (a slow link may then get a
      // few early full snapshots — small, the tree is young — until the first ack is timed).
      const window =
        peer.ackDelayMs === undefined
          ? 2 * this.config.suspectAfterPolls * poll + 2 * (peer.rttMs ?? 0)
          : 2 * peer.ackDelayMs + poll;
      if (now - (q[0] as { at: number }).at <= window)
        return (q[q.length - 1] as { version: number }).version;
      q.length = 0;
    }
    return acked;
  }

  // ---------------------------------------------------------------- local execution

  private enqueue(
    kind: Job["kind"],
    reqId: string,
    from: NodeId | undefined,
    attempt: number,
    request: EngineRequest,
    now: number,
    out: Effect[],
  ): void {
    if (kind === "client" && this.queueDepth() >= this.config.maxQueue) {
      this.stats_.rejectedOverload++;
      const p = this.pending.get(reqId);
      this.pending.delete(reqId);
      out.push(this.failReply(reqId, request, now, "overloaded: queue full", "overloaded", p));
      return;
    }
    const job: Job = {
      jobId: `j${++this.jobSeq}`,
      kind,
      reqId,
      from,
      attempt,
      request,
      enqueuedAt: now,
      startedAt: now,
      handle: undefined,
      matched: 0,
      cacheTokens: 0,
      cancelled: false,
    };
    this.queue.push(job);
    if (kind === "forward") this.queuedForwards.set(forwardKey(from as NodeId, reqId, attempt), job);
    this.pump(now, out);
  }

  /** Starts queued jobs while there is a free slot (FIFO). Algorithm 1 lines 7-11. */
  private pump(now: number, out: Effect[]): void {
    while (this.running.size < this.config.concurrency && this.queueHead < this.queue.length) {
      const job = this.queue[this.queueHead] as Job;
      this.queue[this.queueHead++] = undefined as unknown as Job;
      if (this.queueHead > 1024 && this.queueHead * 2 > this.queue.length) {
        this.queue.splice(0, this.queueHead);
        this.queueHead = 0;
      }
      if (job.cancelled) {
        this.cancelledQueued--;
        continue;
      }
      if (job.kind === "forward")
        this.queuedForwards.delete(forwardKey(job.from as NodeId, job.reqId, job.attempt));
      job.startedAt = now;
      const tokens = job.request.tokens;
      let evicted: ReturnType<RadixTree["evict"]> = [];
      if (this.config.cacheMode === "node-managed") {
        const { length, handle } = this.tree.lock(tokens);
        job.handle = handle;
        job.matched = length;
        const need = tokens.length - length;
        let avail = this.tree.free() - this.reserved;
        if (need > avail) {
          evicted = this.tree.evict(need - avail);
          for (const r of evicted) {
            this.stats_.evictedTokens += r.path.length - r.keep;
            this.evictedDecayed += r.path.length - r.keep;
          }
          avail = this.tree.free() - this.reserved;
        }
        // If the prompt cannot fit (capacity, or pinned by concurrent runs) it runs uncached.
        job.cacheTokens = need <= avail ? tokens.length : length;
        this.reserved += job.cacheTokens - length;
      } else {
        job.matched = this.tree.match(tokens);
        job.cacheTokens = tokens.length;
      }
      this.running.set(job.jobId, job);
      out.push({
        type: "engine-run",
        jobId: job.jobId,
        request: job.request,
        evicted,
        cacheTokens: job.cacheTokens,
      });
    }
  }

  private finishJob(job: Job): void {
    this.running.delete(job.jobId);
    if (job.handle !== undefined) {
      this.reserved -= job.cacheTokens - job.matched;
      this.tree.unlock(job.handle);
      job.handle = undefined;
    }
  }

  private onEngineDone(jobId: string, result: EngineResult, out: Effect[]): void {
    const job = this.running.get(jobId);
    if (!job) return; // from before a restart
    const now = this.deps.now();
    // Algorithm 1 lines 12-13: the tree mirrors what the engine now caches.
    if (this.config.cacheMode === "node-managed") {
      if (job.cacheTokens > job.matched) this.insert(job.request.tokens.subarray(0, job.cacheTokens));
      this.insertedDecayed =
        PRESSURE_DECAY * this.insertedDecayed + Math.max(0, job.cacheTokens - job.matched);
      this.evictedDecayed *= PRESSURE_DECAY;
    } else {
      this.tree.resetTo(result.cachedSequences ?? [], ++this.tick);
    }
    this.finishJob(job);
    this.prefillFit.sample(job.request.tokens.length - result.cachedTokens, result.prefillMs);
    const serviceMs = now - job.startedAt;
    this.serviceMsEwma =
      this.serviceMsEwma === undefined
        ? serviceMs
        : this.serviceMsEwma + (serviceMs - this.serviceMsEwma) / 8;
    const timing: ServedTiming = {
      servedBy: this.config.id,
      queueMs: job.startedAt - job.enqueuedAt,
      prefillMs: result.prefillMs,
      decodeMs: result.decodeMs,
    };
    if (job.kind === "forward") {
      this.stats_.servedForPeers++;
      const msg: PeerMessage = {
        type: "result",
        reqId: job.reqId,
        attempt: job.attempt,
        result: stripCache(result),
        timing,
      };
      this.answerForward(job, msg, now, out);
    } else {
      this.stats_.servedLocal++;
      const p = this.pending.get(job.reqId);
      if (p) {
        this.pending.delete(job.reqId);
        out.push(this.okReply(p, stripCache(result), timing, 0, now));
      }
    }
    this.pump(now, out);
  }

  private insert(tokens: Tokens): void {
    this.tree.insert(tokens, ++this.tick);
  }

  private onEngineFailed(jobId: string, error: string, out: Effect[]): void {
    const job = this.running.get(jobId);
    if (!job) return;
    const now = this.deps.now();
    this.stats_.engineFailures++;
    this.finishJob(job);
    if (job.kind === "forward") {
      const msg: PeerMessage = {
        type: "error",
        reqId: job.reqId,
        attempt: job.attempt,
        error: `engine: ${error}`,
        retryable: true,
      };
      this.answerForward(job, msg, now, out);
    } else {
      const p = this.pending.get(job.reqId);
      if (p) {
        this.pending.delete(job.reqId);
        out.push(this.failReply(job.reqId, job.request, now, `engine: ${error}`, "engine", p));
      }
    }
    this.pump(now, out);
  }
}

/** The error a copy of an already-handled forward gets when no answer is kept to send again. */
export const DUPLICATE_HANDLED = "duplicate forward: this attempt was already handled (no answer kept)";
/** The error a forward gets when its origin cancelled it before it ran. */
export const FORWARD_CANCELLED = "cancelled by origin";

function forwardTimer(p: Pending): Timer {
  return { kind: "forward", reqId: p.reqId, attempt: p.attempt };
}

function ackTimer(p: Pending): Timer {
  return { kind: "ack", reqId: p.reqId, attempt: p.attempt };
}

/** Identifies one of our own attempts (origin side). */
function attemptKey(reqId: string, attempt: number): string {
  return `${reqId}\u0000${attempt}`;
}

/** Identifies one forward attempt from one peer (dedup window, cancels). */
function forwardKey(from: NodeId, reqId: string, attempt: number): string {
  return `${from}\u0000${reqId}\u0000${attempt}`;
}

/** Cached sequences are the engine's private business: never ship them to peers or clients. */
function stripCache(r: EngineResult): EngineResult {
  if (r.cachedSequences === undefined) return r;
  const { cachedSequences: _drop, ...rest } = r;
  return rest;
}
