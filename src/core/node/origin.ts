/**
 * Origin: the requests this node's clients sent it, from routing to the one reply each gets.
 *
 * Request life: route (the policy over local state only) → forward to the best peer, with a timeout →
 * on its result reply (node.ts then makes Algorithm 1 line 17's optimistic insert); on timeout, error,
 * the target being suspected or restarting → the next candidate → finally local execution. A request
 * is answered exactly once: replies that arrive after we moved on are dropped and counted
 * (`lateReplies`). Moving on also sends the abandoned target a `cancel`, so it drops the job if it has
 * not started it: a fallback then costs one computation, not two.
 *
 * Forward acks (bounded latency under message loss and silent partitions): the receiver answers
 * `forward-ack` with its ETA. An attempt not acked within the ack timeout (max(floor, 4 × RTT)) is
 * abandoned like a timed-out one, instead of waiting the whole forward timeout. Once acked, it waits
 * for the answer until ETA-based probe time; then it re-sends the same forward (a probe: idempotent at
 * the receiver, which acks again or re-sends its lost answer) and again needs an ack in time. The
 * forward timeout stays the hard bound of every attempt. A peer that answers but never acks (an older
 * version) is noticed and no longer held to acks.
 *
 * Which peer is routable and where a local run goes are node.ts's decisions: this role says what it
 * wants next (`nextPlanned`, `runHere`) and node.ts acts.
 */
import type { EngineRequest, EngineResult, Tokens } from "../engine.js";
import { invariant } from "../invariant.js";
import { keyTokens, namespaceTokens, requestProblem } from "../namespace.js";
import type { NodeConfig } from "./config.js";
import type { LearnedCosts } from "./cost-model.js";
import { PrefixDemand } from "./demand.js";
import { servesModel } from "./models.js";
import {
  type Candidate,
  createPolicy,
  type Policy,
  type PolicyConfigInput,
  type PolicyName,
} from "./policies/index.js";
import { type Answerer, failReply, okReply } from "./replies.js";
import { planFromOrder } from "./routing.js";
import { type Target, Targets } from "./targets.js";
import {
  type Effect,
  MAX_REQ_ID,
  type NodeDeps,
  type NodeId,
  type PeerMessage,
  type PeerMessageOf,
  type ServedTiming,
  type Timer,
} from "./types.js";

/** The ack timeout is at least this many smoothed RTTs (TCP's RTO allows SRTT + 4 × RTTVAR). */
const ACK_RTT_FACTOR = 4;
/** Prefix keys whose demand an origin tracks (LRU beyond). */
const DEMAND_KEYS = 4096;

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

/** A pending request to run here (its forward attempts are over). */
export interface LocalRun {
  reqId: string;
  attempt: number;
  request: EngineRequest;
}

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
    invalidMessages: 0,
  };
}

type Answer = Extract<PeerMessage, { type: "result" | "error" }>;

export class Origin {
  private policy: Policy;
  private readonly pending = new Map<string, Pending>();
  /** What we know of each peer as a forward target (RTT, acks): node.ts feeds and reads it. */
  readonly targets = new Targets();
  /** Arrivals per prefix at this origin (rent-or-buy); bounded; kept across restart(). */
  private readonly demand: PrefixDemand;
  counters = originCounters();

  constructor(
    private readonly config: NodeConfig,
    private readonly deps: NodeDeps,
    private readonly paranoid: boolean,
  ) {
    this.policy = createPolicy(config.policy, config.policyConfig);
    this.demand = new PrefixDemand(DEMAND_KEYS, config.demandPrior);
  }

  /** A (re)start: no requests, fresh peer state (the policy and the demand learned stay). */
  reset(ids: readonly NodeId[]): void {
    this.pending.clear();
    this.targets.reset(ids);
    this.counters = originCounters();
  }

  /** Without settings: the configured ones if they are for this policy, else its defaults. */
  setPolicy(name: PolicyName, config?: PolicyConfigInput<PolicyName>): void {
    const configured = name === this.config.policy ? this.config.policyConfig : undefined;
    this.policy = createPolicy(name, config ?? configured);
  }

  get policyName(): string {
    return this.policy.name;
  }

  /** The policy ranks peers (false: it never forwards, so no candidates need building). */
  get needsPeers(): boolean {
    return this.policy.needs.peers;
  }

  /** How long an attempt may go unacked: max(floor, 4 × RTT), at most the forward timeout. */
  ackTimeoutMs(rttMs: number | undefined): number {
    const rtt = rttMs ?? this.config.costPrior.rttMs;
    return Math.min(
      this.config.forwardTimeoutMs,
      Math.max(this.config.forwardAckTimeoutMs, ACK_RTT_FACTOR * rtt),
    );
  }

  /**
   * Whose output a request of ours waits for now: the peer of its current attempt, `self` once it
   * runs (or queues) here; undefined when it is not pending.
   */
  servingNow(reqId: string, self: NodeId): NodeId | undefined {
    const p = this.pending.get(reqId);
    if (!p) return undefined;
    return p.current ?? self;
  }

  /** A client request arrived: counted; the refusal to reply at once, if it is not acceptable. */
  admit(reqId: string, request: EngineRequest, now: number): Effect | undefined {
    this.counters.clientRequests++;
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
    evictionPressure: number,
  ): void {
    const plan: NodeId[] = [];
    let target = this.config.id;
    let predicted = selfMatch;
    if (candidates !== undefined) {
      const expectedReuse = this.policy.needs.demand
        ? this.demand.arrive(keyTokens(request), candidates, evictionPressure, namespaceTokens(request))
        : undefined;
      const order =
        candidates.length === 1
          ? [0]
          : this.policy.rank(candidates, {
              promptTokens: request.tokens.length,
              now,
              random: this.deps.random,
              costs,
              expectedReuse,
            });
      if (this.paranoid) checkOrder(order, candidates);
      // A node that does not serve the request's model only routes it: every ranked peer is in its plan.
      const routeOnly = !servesModel(this.config.models, request.model);
      planFromOrder(order, candidates, plan, routeOnly);
      const first = routeOnly ? candidates.find((c) => c.id === plan[0]) : candidates[order[0] ?? 0];
      if (first) {
        target = first.id;
        predicted = first.estimatedMatch;
      }
    }
    this.pending.set(reqId, {
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
    });
  }

  /** The next peer in the request's plan, consumed (undefined: the plan is spent). */
  nextPlanned(reqId: string): NodeId | undefined {
    const p = this.get(reqId);
    return p.next < p.plan.length ? p.plan[p.next++] : undefined;
  }

  /** A new forward attempt to `to` (node.ts found it routable): send it, arm its timers. */
  forward(reqId: string, to: NodeId, now: number, out: Effect[]): void {
    const p = this.get(reqId);
    const peer = this.targets.get(to);
    invariant(peer !== undefined, () => `forwarding to ${to}, which is not a member`);
    // Attempts count up, one per forward, and each earlier one ended in exactly one fallback.
    invariant(p.attempt === p.fallbacks, "a forward attempt began before the last one ended");
    p.attempt++;
    p.current = to;
    p.attemptSentAt = now;
    p.ackedAt = -1;
    p.probes = 0;
    peer.sentSinceQueue++;
    this.counters.forwarded++;
    this.sendForward(p, to, peer, now, out);
    out.push({ type: "set-timer", timer: forwardTimer(p), delayMs: this.config.forwardTimeoutMs });
  }

  /** No peer attempt left: the request runs here (current undefined from now on). */
  runHere(reqId: string): LocalRun {
    const p = this.get(reqId);
    invariant(p.attempt === p.fallbacks, "a request runs here while an attempt is still open");
    p.current = undefined;
    return { reqId, attempt: p.attempt, request: p.request };
  }

  /** The local queue is full: the request fails (answered now, no longer pending). */
  refuseOverloaded(run: LocalRun, now: number): Effect {
    this.counters.rejectedOverload++;
    const p = this.settle(run.reqId);
    return failReply(this.by, run.reqId, run.request, now, "overloaded: queue full", "overloaded", p);
  }

  /** This node does not serve the request's model and no peer serving it took it: it fails. */
  refuseUnserved(run: LocalRun, now: number): Effect {
    const p = this.settle(run.reqId);
    const why = `no reachable node serves model '${run.request.model}'`;
    return failReply(this.by, run.reqId, run.request, now, why, "unserved", p);
  }

  /** Our local run of the request finished: its reply. */
  completeLocal(run: LocalRun, result: EngineResult, timing: ServedTiming, now: number, out: Effect[]): void {
    const p = this.settleLocal(run);
    out.push(okReply(this.by, p, result, timing, 0, now));
  }

  /** Our local run of the request failed: the request fails. */
  failLocal(run: LocalRun, error: string, now: number, out: Effect[]): void {
    const p = this.settleLocal(run);
    out.push(failReply(this.by, run.reqId, run.request, now, error, "engine", p));
  }

  /** Requests whose current attempt went to a peer matching `on` (a snapshot: safe to fail over). */
  waitingOn(on: (peer: NodeId) => boolean): string[] {
    const out: string[] = [];
    for (const p of this.pending.values()) if (p.current !== undefined && on(p.current)) out.push(p.reqId);
    return out;
  }

  /** Whether `to`'s attempt `attempt` is the request's current one. */
  isCurrent(reqId: string, to: NodeId, attempt: number): boolean {
    const p = this.pending.get(reqId);
    return p !== undefined && p.current === to && p.attempt === attempt;
  }

  /**
   * The current forward attempt failed: count it and let node.ts move on. `cancel` tells the
   * abandoned target to drop the job if still queued (timeout, suspicion, send failure: it may hold it
   * yet); not sent when it answered an error, departed, restarted or left the membership (nothing to
   * drop, or nobody).
   */
  fallback(reqId: string, out: Effect[], cancelTimer: boolean, cancel: boolean): void {
    const p = this.get(reqId);
    if (cancelTimer) out.push({ type: "cancel-timer", timer: forwardTimer(p) });
    this.disarmAck(p, out);
    if (cancel && p.current !== undefined)
      out.push({ type: "send", to: p.current, msg: { type: "cancel", reqId: p.reqId, attempt: p.attempt } });
    p.fallbacks++;
    this.counters.fallbacks++;
  }

  /**
   * A forward or ack timer fired. Returns true when the attempt is abandoned (node.ts moves on);
   * a timer of an attempt we moved on from never acts on the current one.
   */
  onTimer(timer: Extract<Timer, { kind: "forward" | "ack" }>, now: number, out: Effect[]): boolean {
    const p = this.pending.get(timer.reqId);
    invariant(p === undefined || timer.attempt <= p.attempt, "a timer for an attempt not yet made");
    if (p?.current === undefined || p.attempt !== timer.attempt) return false;
    if (timer.kind === "forward") {
      this.fallback(p.reqId, out, false, true);
      return true;
    }
    return p.ackArmed && this.onAckTimer(p, now, out);
  }

  /**
   * The ack timer of the current attempt fired. Not acked (the forward, its ack, or the probe was
   * lost, or the peer is cut off): abandon the attempt like a timed-out one — cancel, next candidate.
   * Acked but unanswered past its ETA (the answer may be lost): probe by re-sending the same forward.
   */
  private onAckTimer(p: Pending, now: number, out: Effect[]): boolean {
    p.ackArmed = false;
    const to = p.current as NodeId;
    const peer = this.targets.get(to);
    const acked = p.ackedAt === p.probes;
    // Probe (re-send the same forward) when the peer acked this round and owes only the answer, or
    // has not acked yet but has resends left; otherwise give up on the peer.
    if (!peer || (!acked && p.probes >= this.config.forwardResends)) {
      this.counters.ackTimeouts++;
      // Only an attempt never acked may hint at a peer that does not ack.
      if (p.ackedAt < 0 && peer) this.targets.abandonedUnacked(to, p.reqId, p.attempt);
      this.fallback(p.reqId, out, true, true);
      return true;
    }
    p.probes++;
    // Counted apart: a probe asks for an answer the peer owes; a re-send is a forward that may be lost.
    if (acked) this.counters.probes++;
    else this.counters.resends++;
    this.sendForward(p, to, peer, now, out);
    return false;
  }

  /**
   * A `forward-ack` arrived. Any ack shows the peer acks (so its forwards are held to the ack
   * timeout). For the current, not yet acked attempt: wait for the answer until its ETA (with margin,
   * doubling per probe) before probing; without an ETA, the forward timeout alone bounds the wait.
   */
  onForwardAck(from: NodeId, msg: PeerMessageOf<"forward-ack">, out: Effect[]): void {
    const { reqId, attempt, etaMs } = msg;
    if (typeof reqId !== "string" || reqId.length > MAX_REQ_ID || !Number.isInteger(attempt)) {
      this.counters.invalidMessages++;
      return;
    }
    this.targets.acked(from, reqId, attempt);
    const p = this.pending.get(reqId);
    if (!p || p.current !== from || p.attempt !== attempt || p.ackedAt === p.probes) {
      this.counters.ignoredAcks++;
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
      (2 * eta + this.ackTimeoutMs(this.targets.get(from)?.rttMs)) * 2 ** Math.min(p.probes, 16),
    );
    p.ackArmed = true;
    out.push({ type: "set-timer", timer: ackTimer(p), delayMs: waitMs });
  }

  /**
   * A `result` from a peer. For the current attempt: the reply, and the prompt the peer now caches
   * (node.ts believes it: line 17); otherwise late, counted, undefined.
   */
  onResult(from: NodeId, msg: PeerMessageOf<"result">, now: number, out: Effect[]): Tokens | undefined {
    const p = this.current(from, msg);
    if (!p) return undefined;
    out.push({ type: "cancel-timer", timer: forwardTimer(p) });
    this.disarmAck(p, out);
    this.settle(p.reqId);
    const { timing } = msg;
    const remote = timing.queueMs + timing.prefillMs + timing.decodeMs;
    // After a probe the answer may be a re-sent one: its delay is no round trip.
    if (p.probes === 0) this.targets.sampleRtt(from, now - p.attemptSentAt - remote);
    out.push(okReply(this.by, p, msg.result, { ...timing, servedBy: from }, 1, now));
    return keyTokens(p.request);
  }

  /** An `error` from a peer: for the current attempt, fall back (true: node.ts moves on). */
  onError(from: NodeId, msg: PeerMessageOf<"error">, out: Effect[]): boolean {
    const p = this.current(from, msg);
    if (!p) return false;
    // The peer (or the stream carrying its answer) ended this attempt itself: nothing to cancel.
    this.fallback(p.reqId, out, true, false);
    return true;
  }

  /** The pending request `msg` answers, if it answers its current attempt; else counted as late. */
  private current(from: NodeId, msg: Answer): Pending | undefined {
    const p = this.pending.get(msg.reqId);
    if (p && p.current === from && p.attempt === msg.attempt) return p;
    this.counters.lateReplies++;
    this.targets.lateAnswer(from, msg.reqId, msg.attempt);
    return undefined;
  }

  /**
   * Sends the current attempt's forward (first send or probe) and, if the peer acks, arms the wait
   * for its ack.
   */
  private sendForward(p: Pending, to: NodeId, peer: Target, now: number, out: Effect[]): void {
    // The budget the target has: what is left of our timeout less the round trip the answer needs.
    const left = this.config.forwardTimeoutMs - (now - p.attemptSentAt);
    const deadlineMs = Math.max(0, Math.floor(left - (peer.rttMs ?? 0)));
    out.push({
      type: "send",
      to,
      msg: { type: "forward", reqId: p.reqId, attempt: p.attempt, hops: 1, request: p.request, deadlineMs },
    });
    const ackMs = this.ackTimeoutMs(peer.rttMs);
    // An ack timeout as long as the forward timeout adds nothing: acks are then not waited for.
    p.ackArmed = peer.acksForwards && ackMs < this.config.forwardTimeoutMs;
    if (p.ackArmed) out.push({ type: "set-timer", timer: ackTimer(p), delayMs: ackMs });
  }

  /** The ack of the current attempt, or of a probe, is not needed any more. */
  private disarmAck(p: Pending, out: Effect[]): void {
    if (!p.ackArmed) return;
    p.ackArmed = false;
    out.push({ type: "cancel-timer", timer: ackTimer(p) });
  }

  private get(reqId: string): Pending {
    const p = this.pending.get(reqId);
    invariant(p !== undefined, () => `request ${reqId} is not pending`);
    return p;
  }

  /** Exactly once: the request leaves `pending` as its reply is made, and only then. */
  private settle(reqId: string): Pending {
    const p = this.get(reqId);
    this.pending.delete(reqId);
    return p;
  }

  /** A local run ends the request it ran for: that request waits on it, at that attempt. */
  private settleLocal(run: LocalRun): Pending {
    const p = this.pending.get(run.reqId);
    invariant(
      p !== undefined && p.current === undefined && p.attempt === run.attempt && p.request === run.request,
      () => `a local run of ${run.reqId} ended, but the request does not wait on it`,
    );
    return this.settle(run.reqId);
  }

  /** This node, under its current policy: who signs the replies. */
  private get by(): Answerer {
    return { id: this.config.id, policy: this.policy.name };
  }
}

/** The policy contract (O(candidates), checked runs only): a permutation of indexes holding self. */
function checkOrder(order: readonly number[], candidates: readonly Candidate[]): void {
  const seen = new Set(order);
  const valid = order.every((i) => Number.isInteger(i) && i >= 0 && i < candidates.length);
  invariant(valid && seen.size === order.length, "the policy's order is no permutation of candidates");
  invariant(seen.has(candidates.findIndex((c) => c.self)), "the policy's order lacks self");
}

function forwardTimer(p: Pending): Timer {
  return { kind: "forward", reqId: p.reqId, attempt: p.attempt };
}

function ackTimer(p: Pending): Timer {
  return { kind: "ack", reqId: p.reqId, attempt: p.attempt };
}
