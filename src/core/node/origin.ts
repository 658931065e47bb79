/**
 * Origin: the requests this node's clients sent it, from routing to the one reply each gets.
 *
 * Request life: route (the policy over local state only) → forward to the best peer, with a timeout →
 * on its result reply (node.ts then makes Algorithm 1 line 17's optimistic insert); on timeout, error,
 * the target being suspected or restarting → the next candidate → finally local execution. A request
 * is answered exactly once: replies that arrive after we moved on are dropped and counted
 * (`lateReplies`). Moving on also sends the abandoned target a `cancel`, so it drops the job if it has
 * not started it: a fallback then costs one computation, not two (put off while a hedge may still
 * take that job's answer: hedge.ts). Once none of its answer can be taken any more, a final cancel
 * follows, so a peer that started it aborts the run (abort-runs.ts `owedCancels`).
 *
 * Forward acks bound each attempt's latency under message loss and silent partitions: their timing
 * (wait, probe, give up) is forward-acks.ts's; an attempt's end, and what it earns its peer, is
 * forward-attempts.ts's; asking a silent peer again while the request runs here is hedging.ts's.
 *
 * Which peer is routable and where a local run goes are node.ts's decisions: this role says what it
 * wants next (`nextPlanned`, `runHere`) and node.ts acts.
 */
import type { EngineRequest, EngineResult, Tokens } from "../engine.js";
import { invariant } from "../invariant.js";
import { keyTokens, requestProblem } from "../namespace.js";
import { finalCancel, markFinalCancels, owedCancels } from "./abort-runs.js";
import { GoneClients, type GoneStage } from "./client-gone.js";
import type { NodeConfig } from "./config.js";
import type { LearnedCosts } from "./cost-model.js";
import type { Eviction } from "./demand.js";
import { ForwardAcks, forwardTimeoutFor } from "./forward-acks.js";
import { attemptKey, ForwardAttempts } from "./forward-attempts.js";
import { AnsweredRuns, hedgeOf, hedgeOn } from "./hedge.js";
import { Hedging } from "./hedging.js";
import { PeerLimits } from "./peer-limits.js";
import { forwardTimer, type LocalRun, type Pending, PendingRequests } from "./pending-requests.js";
import { Planner } from "./planner.js";
import type { Candidate, PolicyConfigInput, PolicyName } from "./policies/index.js";
import { type Answerer, failReply, okReply } from "./replies.js";
import { SpotChecks } from "./spot-check.js";
import { Targets } from "./targets.js";
import { Trust } from "./trust.js";
import type {
  Effect,
  GoneReason,
  NodeDeps,
  NodeId,
  PeerMessageOf,
  PeerView,
  ServedTiming,
  Timer,
} from "./types.js";

/** The origin's counters (its part of NodeStats). */
function originCounters() {
  return {
    clientRequests: 0,
    forwarded: 0,
    fallbacks: 0,
    lateReplies: 0,
    ackTimeouts: 0,
    probes: 0,
    resends: 0,
    ignoredAcks: 0,
    rejectedOverload: 0,
    /** Client requests refused because no node was expected to answer within their deadline. */
    clientDeadlineRefusals: 0,
    invalidMessages: 0,
    overdueAnswers: 0,
    offloaded: 0,
    hedgedAnswers: 0,
    clientGoneQueued: 0,
    clientGoneForwarded: 0,
    clientGoneRunning: 0,
    clientGoneDeadlineQueued: 0,
    clientGoneDeadlineForwarded: 0,
    clientGoneDeadlineRunning: 0,
  };
}

export class Origin {
  /** The policy's plan per request, and what routing learns across requests (planner.ts). */
  private readonly planner: Planner;
  /** Requests of ours not answered yet (pending-requests.ts). */
  private readonly pending = new PendingRequests();
  /** Local runs that complete unreplied: a silent peer answered first (hedge.ts), or the client left. */
  private readonly answeredRuns = new AnsweredRuns();
  /** What we know of each peer as a forward target (RTT, acks): node.ts feeds and reads it. */
  readonly targets = new Targets();
  /** The timing of each forward attempt: acks, probes, answer deadline (forward-acks.ts). */
  private readonly acks: ForwardAcks;
  /** What each peer's answers to our forwards earned it (trust.ts): node.ts asks `routable`. */
  readonly trust: Trust;
  /** What each peer said a forward must fit (peer-limits.ts): node.ts routes only what fits. */
  readonly limits: PeerLimits;
  /** Answers of peers kept to recompute when idle (spot-check.ts). */
  readonly spot: SpotChecks;
  /** Requests whose client hung up (client-gone.ts): node.ts checks that none is replied to. */
  readonly gone = new GoneClients();
  /** Kept one object (reset in place): hedging and the attempts count into it. */
  readonly counters = originCounters();
  /** Asking a silent peer again while its request runs here (hedging.ts). */
  private readonly hedging: Hedging;
  /** Each forward attempt's end and what it earns its peer (forward-attempts.ts). */
  private readonly attempts: ForwardAttempts;

  constructor(
    private readonly config: NodeConfig,
    private readonly deps: NodeDeps,
    paranoid: boolean,
  ) {
    this.planner = new Planner(config, deps, paranoid);
    this.acks = new ForwardAcks(config, this.targets);
    this.trust = new Trust({
      enabled: config.peerTrust,
      failures: config.trustFailures,
      windowMs: config.trustWindowMs,
      openMs: config.trustOpenMs,
      maxOpenMs: config.trustMaxOpenMs,
      maxUnanswered: config.trustMaxUnanswered,
    });
    this.spot = new SpotChecks(config.spotCheckRate);
    this.limits = new PeerLimits(() => deps.now());
    this.hedging = new Hedging(this.targets, this.trust, this.acks, this.counters);
    this.attempts = new ForwardAttempts(
      config.answerRecovery,
      this.targets,
      this.trust,
      this.limits,
      this.acks,
      this.hedging,
      this.counters,
      () => deps.now(),
    );
  }

  /** A (re)start: no requests, fresh peer state (the policy and the demand learned stay). */
  reset(ids: readonly NodeId[]): void {
    this.pending.clear();
    this.answeredRuns.clear();
    this.targets.reset(ids);
    this.trust.reset(ids);
    this.limits.clear();
    this.spot.reset();
    this.gone.clear();
    Object.assign(this.counters, originCounters());
  }

  /**
   * The end of a node step: the requests settled in it owe final cancels (abort-runs.ts), and every
   * cancel of a request no longer waiting is final. Returns `out`.
   */
  finishStep(out: Effect[]): Effect[] {
    for (const p of this.pending.takeSettled()) owedCancels(p, this.reachable, out);
    for (let i = 0, n = out.length; i < n; i++) {
      const e = out[i] as Effect;
      if (e.type === "engine-run") this.runStarted(e.request, out);
    }
    markFinalCancels(out, (id) => this.pending.has(id));
    return out;
  }

  private readonly reachable = (id: NodeId): boolean => this.targets.get(id) !== undefined;

  /**
   * A run started on our engine; if it is a request of ours, no answer of the attempts it moved on
   * from is taken any more — bar its hedge's, if not a stream's (`lateAnswered`): their peers get
   * final cancels now rather than at its end, and a stream's hedge ends (hedge.ts).
   */
  private runStarted(request: EngineRequest, out: Effect[]): void {
    const p = this.pending.find(request.id);
    if (p?.request !== request || p.current !== undefined || p.abandoned === undefined) return;
    if (request.stream === true) this.hedging.end(p, out, true, true);
    owedCancels(p, this.reachable, out, (a) => !hedgeOn(p.hedge, a.to, a.attempt));
  }

  /**
   * Our own restart drops every pending request (its client is failed by the runtime): the peers
   * still running their attempts get final cancels — the current one's, and those abandoned.
   */
  dropAll(): Effect[] {
    const out: Effect[] = [];
    for (const p of this.pending.values()) {
      if (p.current !== undefined) out.push(finalCancel(p.current, p.reqId, p.attempt));
      this.hedging.end(p, out);
      this.pending.settle(p.reqId);
    }
    return this.finishStep(out).filter((e) => e.type === "send");
  }

  /** A peer joined (run time). */
  addPeer(id: NodeId): void {
    this.targets.add(id);
    this.trust.add(id);
  }

  /** A peer left the membership (run time). */
  removePeer(id: NodeId): void {
    this.targets.remove(id);
    this.trust.remove(id);
    this.limits.forget(id);
  }

  /** Its part of the peer's `PeerView`. */
  peerView(id: NodeId): Pick<PeerView, "rttMs" | "acksForwards" | "trust" | "limits"> {
    return { ...this.targets.view(id), trust: this.trust.view(id), limits: this.limits.of(id) };
  }

  /** Without settings: the configured ones if they are for this policy, else its defaults. */
  setPolicy(name: PolicyName, config?: PolicyConfigInput<PolicyName>): void {
    this.planner.setPolicy(name, config);
  }

  get policyName(): string {
    return this.planner.policyName;
  }

  /** The policy ranks peers (false: it never forwards, so no candidates need building). */
  get needsPeers(): boolean {
    return this.planner.needsPeers;
  }

  /**
   * Our forwards to `id` its last reported depth does not count: with `freshPeerLoad` those in
   * flight (for at most their ack timeout), else those sent since its last header.
   */
  unreportedTo(id: NodeId, now: number): number {
    if (!this.config.freshPeerLoad) return this.targets.sentSinceQueue(id);
    return this.targets.inFlightTo(id, now, this.ackTimeoutMs(this.targets.rttMs(id)));
  }

  /** How long an attempt may go unacked: max(floor, 4 × RTT), at most the forward timeout. */
  ackTimeoutMs(rttMs: number | undefined): number {
    return this.acks.timeoutMs(rttMs);
  }

  /**
   * Whose output a request of ours waits for now: the peer of its current attempt, `self` once it
   * runs (or queues) here; undefined when it is not pending.
   */
  servingNow(reqId: string, self: NodeId): NodeId | undefined {
    const p = this.pending.find(reqId);
    if (!p) return undefined;
    return p.current ?? self;
  }

  /** The request a pending id stands for. */
  requestOf(reqId: string): EngineRequest {
    return this.pending.get(reqId).request;
  }

  /** A client request arrived: counted; the refusal to reply at once, if it is not acceptable. */
  admit(reqId: string, request: EngineRequest, now: number): Effect | undefined {
    this.counters.clientRequests++;
    this.gone.reopened(reqId);
    // The runtime must use unique ids; answering would be ambiguous, so refuse this one only.
    if (this.pending.has(reqId))
      return failReply(this.by, reqId, request, now, "duplicate request id", "invalid");
    const why = requestProblem(request, this.config.maxPromptTokens);
    if (why !== undefined) return failReply(this.by, reqId, request, now, why, "invalid");
    return undefined;
  }

  /**
   * Routes an admitted request: the policy's order over `candidates` (self first; undefined when the
   * policy never forwards) becomes its plan. node.ts then walks the plan (`nextPlanned`).
   */
  open(
    reqId: string,
    request: EngineRequest,
    now: number,
    selfMatch: number,
    candidates: Candidate[] | undefined,
    costs: LearnedCosts,
    eviction: Eviction,
  ): void {
    const plan = this.planner.route(request, now, selfMatch, candidates, costs, eviction);
    this.pending.open(reqId, request, plan, now, forwardTimeoutFor(this.config, request, costs));
  }

  /**
   * The next peer in the request's plan, consumed (undefined: the plan is spent, or the request
   * lost `maxTimedOutAttempts` attempts to timeouts and runs here now).
   */
  nextPlanned(reqId: string): NodeId | undefined {
    const p = this.pending.get(reqId);
    if (this.acks.outOfTimeouts(p)) p.next = p.plan.length;
    return p.next < p.plan.length ? p.plan[p.next++] : undefined;
  }

  /** A new forward attempt to `to` (node.ts found it routable): send it, arm its timers. */
  forward(reqId: string, to: NodeId, now: number, out: Effect[]): void {
    this.attempts.begin(this.pending.get(reqId), to, now, out);
  }

  /**
   * Offload: the request, waiting in our queue, goes to `to` instead (node.ts took it out of the
   * queue and advances it next): a plan of that one peer, then here again.
   */
  reroute(reqId: string, to: NodeId, expectMs?: number): void {
    const p = this.pending.get(reqId);
    invariant(p.current === undefined && p.attempt === p.fallbacks, "rerouting a request not waiting here");
    p.plan = [to];
    // Offload's estimate of its answer: what the answer deadline and answer recovery time it by.
    p.expect = expectMs === undefined ? [] : [expectMs];
    p.next = 0;
    this.counters.offloaded++;
  }

  /** No peer attempt left: the request runs here (current undefined from now on). */
  runHere(reqId: string): LocalRun {
    const p = this.pending.get(reqId);
    invariant(p.attempt === p.fallbacks, "a request runs here while an attempt is still open");
    p.current = undefined;
    const run: LocalRun = { reqId, attempt: p.attempt, request: p.request };
    // It waited on attempts that timed out already: it runs ahead of what came after it, not at the
    // tail — unless a wait bound is set: going ahead would push jobs already admitted past theirs.
    // Either way it tries no peer again.
    if (this.acks.runsFirst(p)) {
      if (this.config.maxWaitMs > 0) run.stays = true;
      else {
        run.priority = true;
        run.since = p.receivedAt;
      }
    }
    return run;
  }

  /** The local queue is full: the request fails (answered now, no longer pending). */
  refuseOverloaded(run: LocalRun, now: number, out: Effect[], waitMs?: number): void {
    this.hedging.end(this.pending.get(run.reqId), out);
    out.push(this.overloaded(run, now, waitMs));
  }

  private overloaded(run: LocalRun, now: number, waitMs?: number): Effect {
    this.counters.rejectedOverload++;
    const bound = this.pending.get(run.reqId).waitBound;
    const p = this.pending.settle(run.reqId);
    if (bound?.tripped === true && bound.deadline) {
      this.counters.clientDeadlineRefusals++;
      const left = Math.max(0, Math.floor(p.deadlineAt - now));
      const why =
        `deadline: no node is expected to answer within the ${left} ms left of the client's deadline ` +
        `(here: ${Math.ceil(waitMs ?? 0)} ms of queue + ${Math.ceil(bound.runMs)} ms of run)`;
      // Retry once our queue could fit it: what the wait exceeds the bound by, at the measured pace.
      const retryAfterMs = Math.max(1_000, (waitMs ?? 0) - Math.max(0, bound.ms));
      return failReply(this.by, run.reqId, run.request, now, why, "deadline", p, retryAfterMs);
    }
    if (waitMs === undefined)
      return failReply(this.by, run.reqId, run.request, now, "overloaded: queue full", "overloaded", p);
    const why = `overloaded: expected wait ${Math.ceil(waitMs)} ms exceeds ${this.config.maxWaitMs} ms`;
    // Retry once the queue has drained back under the bound, at the measured pace.
    const retryAfterMs = Math.max(1_000, waitMs - this.config.maxWaitMs);
    return failReply(this.by, run.reqId, run.request, now, why, "overloaded", p, retryAfterMs);
  }

  /**
   * Admission by expected wait (`maxWaitMs`): whether a local run expected to start in `waitMs`
   * waits too long, and may instead go to a peer expected to start it in time (only a request
   * never forwarded yet: one whose peers failed it does not try them again).
   */
  waitsTooLong(
    reqId: string,
    waitMs: number | undefined,
    now = 0,
    runMs = 0,
  ): "spill" | "refuse" | undefined {
    const p = this.pending.get(reqId);
    // The bound runs from admission: a request back from failed attempts has that much less left.
    const max = this.waitLeftMs(reqId, now);
    // A client deadline (deadline.ts) bounds the wait too: what is left of it less our own run.
    const byDeadline = p.deadlineAt - now - runMs;
    const deadline = byDeadline < max;
    const ms = Math.min(max, byDeadline);
    p.waitBound = { ms, deadline, runMs, tripped: false };
    if (!Number.isFinite(ms) || (waitMs ?? 0) <= ms) return undefined;
    // Without a measured wait only a deadline already too short for our run refuses.
    if (waitMs === undefined && !deadline) return undefined;
    p.waitBound.tripped = true;
    return p.attempt === 0 ? "spill" : "refuse";
  }

  /**
   * What is left of `maxWaitMs` for `reqId` at `now`, counted from its admission here (∞ when the
   * bound is off): forwards, fallbacks and our queue all spend it.
   */
  waitLeftMs(reqId: string, now: number): number {
    if (!(this.config.maxWaitMs > 0)) return Number.POSITIVE_INFINITY;
    return Math.max(0, this.config.maxWaitMs - (now - this.pending.get(reqId).receivedAt));
  }

  /** The wait a peer may make the request wait (its start), as `waitsTooLong` last bounded it. */
  waitBoundMs(reqId: string): number {
    return this.pending.get(reqId).waitBound?.ms ?? this.config.maxWaitMs;
  }

  /** This node does not serve the request's model and no peer serving it took it: it fails. */
  refuseUnserved(run: LocalRun, now: number, out: Effect[]): void {
    const p = this.pending.settle(run.reqId);
    this.hedging.end(p, out);
    const why = `no reachable node serves model '${run.request.model}'`;
    out.push(failReply(this.by, run.reqId, run.request, now, why, "unserved", p));
  }

  /**
   * The client of `reqId` hung up (client-gone.ts): the request settles unreplied. `dropLocal` takes
   * our client's job out of the queue ("queued") or finds it running ("running"). Undefined when the
   * request is not pending (unknown, or answered already): nothing to do.
   */
  clientGone(
    { reqId, reason = "hangup" }: { reqId: string; reason?: GoneReason },
    out: Effect[],
    dropLocal: (reqId: string) => "queued" | "running" | undefined,
  ): GoneStage | undefined {
    const p = this.pending.find(reqId);
    if (p === undefined) return undefined;
    let stage: GoneStage;
    if (p.current !== undefined) {
      // Neither a timeout nor a failure of the peer: its timers go, its peer gets the cancel.
      this.attempts.end(p, out, true, true, false);
      stage = "forwarded";
    } else {
      const local = dropLocal(reqId);
      invariant(local !== undefined, () => `${reqId} is pending here, yet neither queued nor running`);
      // Running: it completes unreplied (or is aborted: abort-runs.ts), as one a hedge answered does.
      if (local === "running") this.answeredRuns.add(p);
      stage = local;
    }
    this.hedging.end(p, out);
    this.pending.settle(reqId);
    this.gone.add(reqId);
    this.counters[GONE_COUNTER[stage]]++;
    if (reason === "deadline") this.counters[DEADLINE_COUNTER[stage]]++;
    return stage;
  }

  /** Our local run of the request finished: its reply. */
  completeLocal(run: LocalRun, result: EngineResult, timing: ServedTiming, now: number, out: Effect[]): void {
    if (this.answeredRuns.take(run.reqId, run.attempt)) return void this.planner.learnDecode(result);
    const p = this.pending.settleLocal(run);
    this.hedging.end(p, out);
    this.planner.learnDecode(result);
    out.push(okReply(this.by, p, result, timing, 0, now));
  }

  /** Our local run of the request was aborted (abort-runs.ts): it had gone unanswered already. */
  abortedLocal(run: LocalRun): void {
    invariant(this.answeredRuns.take(run.reqId, run.attempt), () => `${run.reqId} aborted while wanted`);
  }

  /** Our local run of the request failed: the request fails. */
  failLocal(run: LocalRun, error: string, now: number, out: Effect[]): void {
    if (this.answeredRuns.take(run.reqId, run.attempt)) return;
    const p = this.pending.settleLocal(run);
    this.hedging.end(p, out);
    out.push(failReply(this.by, run.reqId, run.request, now, error, "engine", p));
  }

  /**
   * The request was queued here (node.ts): if a peer acked one of its attempts and went silent or
   * overdue, that peer is asked again meanwhile (hedge.ts). Not before: a request refused here is
   * answered already, and asking would only start work nobody wants.
   */
  hedge(reqId: string, now: number, out: Effect[], started: () => boolean): void {
    const p = this.pending.find(reqId);
    if (p !== undefined) this.hedging.ask(p, now, out, started);
  }

  /** `peer` restarted (at `epoch`), left or is down: the hedges on it end (hedging.ts `endTo`). */
  endHedgesTo(peer: NodeId, out: Effect[], epoch?: number, started?: (reqId: string) => boolean): void {
    this.hedging.endTo(this.pending.values(), peer, out, epoch, started);
  }

  /** A hedge's timer fired: ask its peer again while the request still runs here. */
  onHedgeTimer(
    timer: Extract<Timer, { kind: "hedge" }>,
    now: number,
    out: Effect[],
    started: () => boolean,
  ): void {
    const p = this.pending.find(timer.reqId);
    if (p !== undefined && hedgeOf(p)?.attempt === timer.attempt) this.hedging.ask(p, now, out, started);
  }

  /** Requests whose current attempt `peer` lost (forward-attempts.ts `lostTo`). */
  lostTo(peer: NodeId, epoch?: number): string[] {
    return this.attempts.lostTo(this.pending.values(), peer, epoch);
  }

  /** Requests whose current attempt went to a peer matching `on` (a snapshot: safe to fail over). */
  waitingOn(on: (peer: NodeId) => boolean): string[] {
    const out: string[] = [];
    for (const p of this.pending.values()) if (p.current !== undefined && on(p.current)) out.push(p.reqId);
    return out;
  }

  /** Whether `to`'s attempt `attempt` is the request's current one. */
  isCurrent(reqId: string, to: NodeId, attempt: number): boolean {
    const p = this.pending.find(reqId);
    return p !== undefined && p.current === to && p.attempt === attempt;
  }

  /** The current forward attempt failed: count it and let node.ts move on (forward-attempts.ts). */
  fallback(
    reqId: string,
    out: Effect[],
    cancelTimer: boolean,
    cancel: boolean,
    timedOut = cancel,
    left = false,
  ): void {
    this.attempts.fallback(this.pending.get(reqId), out, cancelTimer, cancel, timedOut, left);
  }

  /** `peer` said goodbye and drains: the requests to move on (forward-attempts.ts `departed`). */
  departed(peer: NodeId, out: Effect[], answers: boolean): string[] {
    return this.attempts.departed(this.pending.values(), peer, out, answers);
  }

  /** A forward or ack timer fired. True when the attempt is abandoned (node.ts moves on). */
  onTimer(timer: Extract<Timer, { kind: "forward" | "ack" }>, now: number, out: Effect[]): boolean {
    return this.attempts.onTimer(this.pending.find(timer.reqId), timer, now, out);
  }

  /** A `forward-ack` arrived. True: an older incarnation took the job (node.ts fails it over). */
  onForwardAck(from: NodeId, msg: PeerMessageOf<"forward-ack">, out: Effect[]): boolean {
    return this.attempts.onAck(from, msg, this.pending, out);
  }

  /**
   * A `result` from a peer. For the current attempt: the reply, and the prompt the peer now caches
   * (node.ts believes it: line 17); otherwise late, counted, undefined.
   */
  onResult(
    from: NodeId,
    msg: PeerMessageOf<"result">,
    now: number,
    out: Effect[],
    takeQueued: (reqId: string) => boolean = () => false,
    abortRun: (reqId: string) => void = () => {},
  ): Tokens | undefined {
    const current = this.attempts.current(this.pending.find(msg.reqId), from, msg);
    const p = current ?? this.lateAnswered(from, msg, out, takeQueued, abortRun);
    if (!p) return undefined;
    out.push({ type: "cancel-timer", timer: forwardTimer(p) });
    this.acks.disarm(p, out);
    // The hedge's own peer answered: nothing of it to cancel.
    this.hedging.end(p, out, !hedgeOn(p.hedge, from, msg.attempt));
    this.targets.landed(from, p.reqId, msg.attempt);
    this.pending.settle(p.reqId);
    // A late answer's attempt ended already (trust counted it then, and its progress just now).
    if (current) this.trust.answered(from, attemptKey(p));
    this.planner.learnDecode(msg.result);
    this.spot.offer(from, p.request, msg.result.text, this.deps.random);
    const { timing } = msg;
    const remote = timing.queueMs + timing.prefillMs + timing.decodeMs;
    // After a probe the answer may be a re-sent one, and a late one is older: no round trip either.
    if (current && p.probes === 0) this.targets.sampleRtt(from, now - p.attemptSentAt - remote);
    const r = msg.result;
    this.targets.samplePrefill(from, timing.prefillMs, Math.max(0, r.promptTokens - r.cachedTokens));
    out.push(okReply(this.by, p, msg.result, { ...timing, servedBy: from }, 1, now));
    return keyTokens(p.request);
  }

  /**
   * A late answer, to an attempt we gave up on (a lost message, an overdue answer), still answers
   * the request while nothing else has started on it: it waits in our queue (`takeQueued` takes it
   * out) or on a later attempt at a peer (abandoned now, with a cancel). Dropping it would make a
   * request that already waits, often behind a long queue, wait for a second run of its own.
   */
  private lateAnswered(
    from: NodeId,
    msg: PeerMessageOf<"result">,
    out: Effect[],
    takeQueued: (reqId: string) => boolean,
    abortRun: (reqId: string) => void,
  ): Pending | undefined {
    const p = this.pending.find(msg.reqId);
    // Counted once: as a hedged answer (below), else as a late reply, whether it answers or is dropped.
    if (!p?.abandoned?.some((a) => a.to === from && a.attempt === msg.attempt))
      return this.attempts.late(undefined);
    // A peer spot checks quarantined since (caught answering wrong): its late answer is not taken.
    if (this.trust.quarantined(from)) return this.attempts.late(undefined);
    if (p.current === undefined) {
      if (takeQueued(p.reqId)) return this.attempts.late(p);
      // It runs here already: its hedge's answer is the reply, and the run completes unreplied.
      if (!hedgeOn(hedgeOf(p), from, msg.attempt)) return this.attempts.late(undefined);
      // Not for a stream our run may have begun already (hedge.ts): that run answers.
      if (p.request.stream === true) {
        this.hedging.end(p, out, false);
        return this.attempts.late(undefined);
      }
      this.answeredRuns.add(p);
      abortRun(p.reqId);
      this.counters.hedgedAnswers++;
      return p;
    }
    // Answered, not a fallback: the other attempt is only cancelled.
    return this.attempts.late(this.attempts.end(p, out, true, true, false));
  }

  /** An `error` from a peer: for the current attempt, fall back (true: node.ts moves on). */
  onError(from: NodeId, msg: PeerMessageOf<"error">, out: Effect[]): boolean {
    const p = typeof msg.reqId === "string" ? this.pending.find(msg.reqId) : undefined;
    return this.attempts.onError(p, from, msg, out);
  }

  /**
   * An answer to the current attempt from a peer spot checks quarantined while it ran (caught
   * answering wrong since it was chosen): not taken, as on every late path; the attempt ends as an
   * error would end it (true: node.ts moves on), and routing no longer picks that peer.
   */
  refuseQuarantined(from: NodeId, msg: PeerMessageOf<"result">, out: Effect[]): boolean {
    if (!this.trust.quarantined(from) || !this.isCurrent(msg.reqId, from, msg.attempt)) return false;
    this.fallback(msg.reqId, out, true, false);
    return true;
  }

  /** A spot check ran here: a peer that answered otherwise is quarantined (and reported, counted). */
  checked(reqId: string, ours: string): void {
    const liar = this.spot.judge(reqId, ours);
    if (liar !== undefined) this.trust.quarantine(liar);
  }

  /** This node, under its current policy: who signs the replies. */
  private get by(): Answerer {
    return { id: this.config.id, policy: this.planner.policyName };
  }
}

const GONE_COUNTER = {
  queued: "clientGoneQueued",
  forwarded: "clientGoneForwarded",
  running: "clientGoneRunning",
} as const;
const DEADLINE_COUNTER = {
  queued: "clientGoneDeadlineQueued",
  forwarded: "clientGoneDeadlineForwarded",
  running: "clientGoneDeadlineRunning",
} as const;
