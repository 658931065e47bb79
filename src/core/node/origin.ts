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
 * Taking a request or refusing it (a bad one, a wait or deadline it would miss) is admission.ts's;
 * its one reply, and what that answer teaches, is answering.ts's. This file owns their state.
 *
 * Which peer is routable and where a local run goes are node.ts's decisions: this role says what it
 * wants next (`nextPlanned`, `runHere`) and node.ts acts.
 */
import type { EngineRequest } from "../engine.js";
import { invariant } from "../invariant.js";
import { finalCancel, markFinalCancels, owedCancels } from "./abort-runs.js";
import { Admission } from "./admission.js";
import { Answering } from "./answering.js";
import { GoneClients } from "./client-gone.js";
import type { NodeConfig } from "./config.js";
import type { LearnedCosts } from "./cost-model.js";
import type { Eviction } from "./demand.js";
import { ForwardAcks, forwardTimeoutFor } from "./forward-acks.js";
import { ForwardAttempts } from "./forward-attempts.js";
import { AnsweredRuns, hedgeOf, hedgeOn } from "./hedge.js";
import { Hedging } from "./hedging.js";
import { originCounters } from "./origin-counters.js";
import { PeerLimits } from "./peer-limits.js";
import { isCurrentAttempt, type LocalRun, PendingRequests } from "./pending-requests.js";
import { Planner } from "./planner.js";
import type { Candidate, PolicyConfigInput, PolicyName } from "./policies/index.js";
import type { Answerer } from "./replies.js";
import { SpotChecks } from "./spot-check.js";
import { Targets } from "./targets.js";
import { Trust } from "./trust.js";
import type { Effect, NodeDeps, NodeId, PeerMessageOf, PeerView, Timer } from "./types.js";

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
  /** Kept one object (reset in place): its parts (hedging, attempts, admission, answering) count into it. */
  readonly counters = originCounters();
  /** Asking a silent peer again while its request runs here (hedging.ts). */
  private readonly hedging: Hedging;
  /** Each forward attempt's end and what it earns its peer (forward-attempts.ts). */
  private readonly attempts: ForwardAttempts;
  /** Whether a client request is taken, and its refusal if not (admission.ts): node.ts asks it. */
  readonly admission: Admission;
  /** The one reply each request gets, and its records (answering.ts): node.ts hands it the answers. */
  readonly answering: Answering;

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
    const failHeld: ConstructorParameters<typeof Hedging>[4] = (p, out) => this.answering.failHeld(p, out);
    this.hedging = new Hedging(this.targets, this.trust, this.acks, this.counters, failHeld);
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
    // This node, under its current policy: who signs the replies.
    const by = (): Answerer => ({ id: this.config.id, policy: this.planner.policyName });
    this.admission = new Admission(config, this.pending, this.gone, this.counters, by);
    const { pending, answeredRuns, gone, planner, targets, acks, trust, spot, hedging, attempts } = this;
    const parts = { pending, answeredRuns, gone, planner, targets, acks, trust, spot, hedging, attempts };
    this.answering = new Answering({ ...parts, counters: this.counters, deps, by });
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
   * from is taken any more — bar its hedge's, if not a stream's (answering.ts `lateAnswered`): their
   * peers get final cancels now rather than at its end, and a stream's hedge ends (hedge.ts).
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

  /** A peer left the membership at `now`: its trust kept for its return (`left`: moved by `departed`). */
  removePeer(id: NodeId, now: number, left = false): void {
    this.targets.remove(id);
    if (!left) this.trust.remove(id, now);
    this.limits.forget(id);
  }

  /**
   * A peer seen in a newer epoch, by any path (mesh.ts `PeerState`, node.ts): what a restart ends goes
   * (trust.ts `restarted`).
   */
  restartedPeer(id: NodeId): void {
    this.trust.restarted(id);
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
    return p === undefined ? undefined : (p.current ?? self);
  }

  /** The request a pending id stands for. */
  requestOf(reqId: string): EngineRequest {
    return this.pending.get(reqId).request;
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

  /** The local queue cannot take the request: it fails (answered now, no longer pending). */
  refuseOverloaded(run: LocalRun, now: number, out: Effect[], waitMs?: number): void {
    this.hedging.end(this.pending.get(run.reqId), out);
    out.push(this.admission.overloaded(run, now, waitMs));
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

  /** `peer` is seen in a newer epoch (full mesh): our forwards to it go again (attempts' `resendTo`). */
  resendTo(peer: NodeId, now: number, out: Effect[]): void {
    this.attempts.resendTo(this.pending.values(), peer, now, out);
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
    return p !== undefined && isCurrentAttempt(p, to, attempt);
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

  /** `peer` said goodbye and drains: the requests to move on; a non-target's trust goes (SWIM's leave). */
  departed(peer: NodeId, out: Effect[], answers: boolean): string[] {
    const moved = this.attempts.departed(this.pending.values(), peer, out, answers);
    if (!this.reachable(peer)) this.trust.remove(peer, this.deps.now());
    return moved;
  }

  /** A forward or ack timer fired. True when the attempt is abandoned (node.ts moves on). */
  onTimer(timer: Extract<Timer, { kind: "forward" | "ack" }>, now: number, out: Effect[]): boolean {
    return this.attempts.onTimer(this.pending.find(timer.reqId), timer, now, out);
  }

  /** A `forward-ack` arrived. True: an older incarnation took the job (node.ts fails it over). */
  onForwardAck(from: NodeId, msg: PeerMessageOf<"forward-ack">, out: Effect[]): boolean {
    return this.attempts.onAck(from, msg, this.pending, out);
  }

  /** Output of request `reqId`'s forward streamed in from `from` (forward-acks.ts `streamed`). */
  onForwardOutput(reqId: string, from: NodeId, now: number): void {
    this.attempts.onOutput(this.pending.find(reqId), from, now);
  }

  /** An `error` from a peer: for the current attempt, fall back (true: node.ts moves on). */
  onError(from: NodeId, msg: PeerMessageOf<"error">, out: Effect[]): boolean {
    const p = typeof msg.reqId === "string" ? this.pending.find(msg.reqId) : undefined;
    return this.attempts.onError(p, from, msg, out);
  }

  /** A spot check ran here: a peer that answered otherwise is quarantined (and reported, counted). */
  checked(reqId: string, ours: string): void {
    const liar = this.spot.judge(reqId, ours);
    if (liar !== undefined) this.trust.quarantine(liar);
  }
}
