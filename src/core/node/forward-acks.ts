/**
 * Forward acks: the timing of one forward attempt of the origin (bounded latency under message loss
 * and silent partitions). Owned by the origin (origin.ts holds the instance; no other role calls it);
 * it decides when to wait, probe or give up, and the origin acts on the verdict (counters, trust,
 * fallback).
 *
 * The receiver answers `forward-ack` with its ETA. An attempt not acked within the ack timeout
 * (max(floor, 4 × RTT)) is abandoned like a timed-out one, instead of waiting the whole forward
 * timeout. Once acked, it waits for the answer until ETA-based probe time; then it re-sends the same
 * forward (a probe: idempotent at the receiver, which acks again or re-sends its lost answer) and
 * again needs an ack in time. The forward timeout stays the hard bound of every attempt. A peer that
 * answers but never acks (an older version) is noticed and no longer held to acks.
 */
import type { EngineRequest } from "../engine.js";
import type { NodeConfig } from "./config.js";
import { expectedRunMs, type LearnedCosts } from "./cost-model.js";
import type { Target, Targets } from "./targets.js";
import type { Effect, NodeId, PeerMessageOf, Timer } from "./types.js";

/** The ack timeout is at least this many smoothed RTTs (TCP's RTO allows SRTT + 4 × RTTVAR). */
const ACK_RTT_FACTOR = 4;
/**
 * Answer recovery asks for an answer this many ack timeouts after our estimate of it: what a lost
 * answer costs, against a probe per answer our estimate put too early.
 */
const RECOVERY_MARGIN = 0.5;
/** Answer recovery probes an acked attempt at least every this many ack timeouts. */
const RECOVERY_MAX_GAP = 4;
/** The longest a forward is waited for however long its run (the config's bound on forwardTimeoutMs). */
const MAX_FORWARD_TIMEOUT_MS = 3_600_000;

/** The timing state of a request's current forward attempt (part of the origin's pending entry). */
export interface AttemptClock {
  reqId: string;
  request: EngineRequest;
  /** When the entry node admitted it (the wait bound, `maxWaitMs`, runs from here). */
  receivedAt: number;
  attempt: number;
  attemptSentAt: number;
  /**
   * `probes` when the current attempt's target last confirmed it holds it (`forward-ack`); -1 if it
   * never did. The latest send is acked iff it equals `probes` (a probe needs a new ack).
   */
  ackedAt: number;
  /**
   * The newest epoch the current attempt's target said in an ack of it (undefined: no ack said one):
   * a restart of the target at a newer epoch lost the job, one at this epoch did not.
   */
  ackEpoch?: number | undefined;
  /**
   * A restart of the target, seen at this epoch while the attempt was not acked yet
   * (forward-attempts.ts `lostTo`).
   */
  restartEpoch?: number | undefined;
  /** The ack timer is armed (so a fallback cancels it). */
  ackArmed: boolean;
  /** Re-sends of the current attempt (each doubles the wait before the next one). */
  probes: number;
  /**
   * The request's waits that ended in a timeout, over all its attempts (an attempt never acked, a
   * probe unanswered, a silent peer; not an overdue answer, which is the peer's failure, trust's
   * business): `maxTimedOutAttempts` caps them.
   */
  timeouts: number;
  /** With peer trust: when the current, acked attempt's answer is overdue (absolute); else ∞. */
  answerBy: number;
  /** How long after its send `answerBy` first allowed the current attempt's answer (0 before). */
  answerWindowMs: number;
  /** Output of the current attempt streamed in since its latest send (`streamed`): as good as an ack. */
  outputSinceSend: boolean;
  /** The client's deadline on our clock (deadline.ts); ∞ when it gave none. */
  deadlineAt: number;
  /**
   * How long each attempt may go unanswered: `forwardTimeoutMs`, or longer for a long run
   * (`forwardTimeoutFor`). Every bound of the attempt's own waits is this one, not the config's.
   */
  forwardTimeoutMs: number;
}

/**
 * What an ack timer means: the attempt was re-sent (`probe`: acked, the answer is owed; `resend`:
 * not acked yet), or it is over — its answer `overdue`, acked once and `silent` since, never acked
 * (`unacked`), or its target `gone` from the membership.
 */
export type AckVerdict = "probe" | "resend" | "overdue" | "silent" | "unacked" | "gone";

export class ForwardAcks {
  constructor(
    private readonly config: NodeConfig,
    private readonly targets: Targets,
  ) {}

  /**
   * How long an attempt may go unacked: max(floor, 4 × RTT), at most the configured forward timeout
   * (not a request's longer one: an ack timeout reaching the configured one is the switch that
   * turns the ack wait off, and it is asked for peers, not requests).
   */
  timeoutMs(rttMs: number | undefined): number {
    const rtt = rttMs ?? this.config.costPrior.rttMs;
    return Math.min(
      this.config.forwardTimeoutMs,
      Math.max(this.config.forwardAckTimeoutMs, ACK_RTT_FACTOR * rtt),
    );
  }

  /** A new attempt sent at `now`: no ack, no probe, no answer deadline yet. */
  begin(a: AttemptClock, now: number): void {
    a.attemptSentAt = now;
    a.ackedAt = -1;
    a.ackEpoch = undefined;
    a.restartEpoch = undefined;
    a.probes = 0;
    a.answerBy = Number.POSITIVE_INFINITY;
    a.answerWindowMs = 0;
    a.outputSinceSend = false;
  }

  /**
   * Output of the current attempt streamed in from its target (relayed to the client): the peer is
   * at work on it, not stalled, so the answer is overdue only as long after the latest output as
   * peer trust first allowed the whole answer (the forward timeout still bounds the attempt), and it
   * stands for a probe's ack (`ackedByOutput`). A peer decoding slower than our estimate, or acking
   * late under load, is kept: given up mid-answer, its sampled stream could only end in an error
   * (client-streams.ts).
   */
  streamed(a: AttemptClock, now: number): void {
    a.outputSinceSend = true;
    if (a.answerWindowMs > 0) a.answerBy = Math.max(a.answerBy, now + a.answerWindowMs);
  }

  /**
   * Whether an answer of the current attempt at `now` is past its first answer deadline (before any
   * output moved it): the deadline that gave such a peer up before output kept it (trust.ts).
   */
  pastFirstDeadline(a: AttemptClock, now: number): boolean {
    return a.answerWindowMs > 0 && now > a.attemptSentAt + a.answerWindowMs;
  }

  /**
   * Sends the current attempt's forward (first send or probe) and, if the peer acks, arms the wait
   * for its ack.
   */
  send(a: AttemptClock, to: NodeId, peer: Target, now: number, out: Effect[]): void {
    out.push({ type: "send", to, msg: this.message(a, peer, now) });
    a.outputSinceSend = false;
    const ackMs = this.timeoutMs(peer.rttMs);
    // An ack timeout as long as the configured forward timeout turns acks off (config.ts), whatever
    // the request's own timeout.
    a.ackArmed = peer.acksForwards && ackMs < this.config.forwardTimeoutMs;
    // A probe's wait ends at the answer deadline too: the answer is overdue then, acked or not.
    const delayMs = Math.max(0, Math.min(ackMs, a.answerBy - now));
    if (a.ackArmed) out.push({ type: "set-timer", timer: ackTimer(a), delayMs });
  }

  /**
   * A hedge's re-ask (hedge.ts): attempt `attempt`'s forward again, no wait armed — the request runs
   * here meanwhile, and the peer re-sends the answer it keeps, or holds the job it still has.
   */
  ask(a: AttemptClock, attempt: number, to: NodeId, peer: Target, now: number, out: Effect[]): void {
    out.push({ type: "send", to, msg: this.message(a, peer, now, attempt) });
  }

  /** Attempt `attempt`'s forward (the current one's by default), with its budgets left at `now`. */
  private message(a: AttemptClock, peer: Target, now: number, attempt = a.attempt): PeerMessageOf<"forward"> {
    // The budget the target has: what is left of our timeout less the round trip the answer needs.
    // A client deadline shortens it: the serving node then refuses what it cannot start in time.
    const left = Math.min(a.forwardTimeoutMs - (now - a.attemptSentAt), a.deadlineAt - now);
    const deadlineMs = Math.max(0, Math.floor(left - (peer.rttMs ?? 0)));
    const msg: PeerMessageOf<"forward"> = {
      type: "forward",
      reqId: a.reqId,
      attempt,
      hops: 1,
      request: a.request,
      deadlineMs,
    };
    // Admission by expected wait: the target starts it within what is left of our bound, or refuses.
    const bound = this.config.maxWaitMs;
    // Less a whole round trip: the one-way delay varies, and a measured RTT bounds it with margin.
    // A peer not measured yet costs what peers typically do (the prior before any is measured): the
    // way there is part of the wait too.
    if (bound > 0) {
      const rttMs = peer.rttMs ?? this.targets.typicalRttMs() ?? this.config.costPrior.rttMs;
      msg.waitMs = Math.max(0, Math.floor(bound - (now - a.receivedAt) - rttMs));
    }
    return msg;
  }

  /** The ack of the current attempt, or of a probe, is not needed any more. */
  disarm(a: AttemptClock, out: Effect[]): void {
    if (!a.ackArmed) return;
    a.ackArmed = false;
    out.push({ type: "cancel-timer", timer: ackTimer(a) });
  }

  /**
   * The current, not yet acked send of `a` was acked by `from`: wait for the answer until its ETA
   * (with margin, doubling per probe) before probing; with peer trust (`expected`: our own estimate
   * of its answer time, used without an ETA), until the answer is overdue; with neither, the forward
   * timeout alone bounds the wait.
   */
  acked(
    a: AttemptClock,
    from: NodeId,
    etaMs: unknown,
    expected: number | undefined,
    now: number,
    out: Effect[],
  ): void {
    a.ackedAt = a.probes;
    // A peer-controlled number: only a finite, non-negative one counts, and never beyond our timeout.
    const eta =
      typeof etaMs === "number" && Number.isFinite(etaMs) && etaMs >= 0
        ? Math.min(etaMs, a.forwardTimeoutMs)
        : undefined;
    if (this.config.peerTrust && a.answerBy === Number.POSITIVE_INFINITY) {
      const expectedMs = eta ?? expected ?? a.forwardTimeoutMs;
      // Admission by expected wait: the peer took it to start within what was left of our bound, so
      // waiting that long is its right, not a stall (our own estimate does not know its queue). Given
      // up earlier, it would run a second time here, after the bound.
      const budgetMs = eta === undefined ? this.waitLeftAtSend(a) : 0;
      const allowed = this.config.answerSlack * expectedMs + this.config.answerSlackMs + budgetMs;
      if (allowed < a.forwardTimeoutMs) {
        a.answerBy = a.attemptSentAt + allowed;
        a.answerWindowMs = allowed;
      }
    }
    const overdueIn = a.answerBy - now;
    const ackMs = this.timeoutMs(this.targets.get(from)?.rttMs);
    const probeIn =
      eta === undefined
        ? this.recoveryIn(a, expected, ackMs, now)
        : (2 * eta + ackMs) * 2 ** Math.min(a.probes, 16);
    if (probeIn === Number.POSITIVE_INFINITY && overdueIn === Number.POSITIVE_INFINITY) {
      this.disarm(a, out);
      return;
    }
    const waitMs = Math.max(0, Math.min(a.forwardTimeoutMs, probeIn, overdueIn));
    a.ackArmed = true;
    out.push({ type: "set-timer", timer: ackTimer(a), delayMs: waitMs });
  }

  /**
   * The ack timer of an acked attempt fired with output streamed in since its latest send: that output
   * stands for the send's ack, so wait on as after an ack (backing off), not re-send the forward at
   * every ack wait, nor count a timed-out wait. False: not so (onTimer decides).
   */
  ackedByOutput(
    a: AttemptClock,
    to: NodeId,
    expected: number | undefined,
    now: number,
    out: Effect[],
  ): boolean {
    if (a.ackedAt < 0 || a.ackedAt === a.probes || !a.outputSinceSend || now >= a.answerBy) return false;
    a.ackArmed = false;
    this.acked(a, to, undefined, expected, now, out);
    return true;
  }

  /** With `maxWaitMs`: what was left of it when the current attempt was sent (else 0). */
  private waitLeftAtSend(a: AttemptClock): number {
    if (!(this.config.maxWaitMs > 0)) return 0;
    return Math.max(0, this.config.maxWaitMs - (a.attemptSentAt - a.receivedAt));
  }

  /**
   * Answer recovery without an ETA: when to ask for the answer of an acked attempt — our own
   * estimate of it (`expected`, ms from the forward) plus half an ack timeout; after a probe the
   * peer acked again (its job still waits or runs: our estimate was short), that long again,
   * doubling. Never more than a few ack timeouts apart: the ack says nothing of when, and an
   * answer lost from a long queue is then asked for within that, whatever our estimate.
   */
  private recoveryIn(a: AttemptClock, expected: number | undefined, ackMs: number, now: number): number {
    if (!this.config.answerRecovery || expected === undefined) return Number.POSITIVE_INFINITY;
    const margin = ackMs * RECOVERY_MARGIN;
    const maxGap = RECOVERY_MAX_GAP * ackMs;
    if (a.probes === 0) return Math.max(0, a.attemptSentAt + Math.min(expected + margin, maxGap) - now);
    return Math.min((expected + margin) * 2 ** Math.min(a.probes - 1, 16), maxGap);
  }

  /**
   * The ack timer of the current attempt to `to` fired. Not acked (the forward, its ack, or the probe
   * was lost, or the peer is cut off): over, like a timed-out attempt. Acked but unanswered past its
   * ETA (the answer may be lost): probe by re-sending the same forward.
   */
  onTimer(a: AttemptClock, to: NodeId, now: number, out: Effect[]): AckVerdict {
    a.ackArmed = false;
    const peer = this.targets.get(to);
    const acked = a.ackedAt === a.probes;
    // Acked (this round or before a probe), and its answer is overdue past any slack: a stalled peer,
    // or a lost answer nobody recovered. Over now rather than at the forward timeout.
    if (a.ackedAt >= 0 && now >= a.answerBy) return "overdue";
    // Answer recovery: the last send went unanswered (it, or the reply, was lost): send it again while
    // the request's timeouts allow another — the peer holds the job or its answer (it acked), or may
    // never have got the forward; either way it, not a cold peer, is the one to ask.
    const recover = !acked && this.config.answerRecovery && !this.outOfTimeouts(a, 1);
    // Probe (re-send the same forward) when the peer acked this round and owes only the answer, or
    // has not acked yet but has resends left; otherwise give up on the peer.
    if (!peer || (!acked && !recover && a.probes >= this.config.forwardResends)) {
      // Only an attempt never acked may hint at a peer that does not ack; one acked before and
      // silent since holds the answer it owes.
      if (a.ackedAt >= 0) return "silent";
      return peer ? "unacked" : "gone";
    }
    if (recover) a.timeouts++;
    a.probes++;
    this.send(a, to, peer, now, out);
    // Told apart: a probe asks for an answer the peer owes; a re-send is a forward that may be lost.
    return acked ? "probe" : "resend";
  }

  /**
   * The `maxTimedOutAttempts` rule, stated once: whether the request's timeouts, with `more` still to
   * come, reach the cap (0: no cap) — it then tries no more peers (origin.ts) and re-sends no more.
   */
  outOfTimeouts(a: AttemptClock, more = 0): boolean {
    return a.timeouts + more >= this.timeoutCap;
  }

  /**
   * With the cap set, a request that lost any attempt to a timeout has waited already: it runs here
   * ahead of every job that arrived after it (and is never offloaded again).
   */
  runsFirst(a: AttemptClock): boolean {
    return a.timeouts > 0 && this.timeoutCap < Number.POSITIVE_INFINITY;
  }

  /** `maxTimedOutAttempts` as a bound (0: no cap). */
  private get timeoutCap(): number {
    return this.config.maxTimedOutAttempts > 0 ? this.config.maxTimedOutAttempts : Number.POSITIVE_INFINITY;
  }
}

function ackTimer(a: AttemptClock): Timer {
  return { kind: "ack", reqId: a.reqId, attempt: a.attempt };
}

/**
 * How long an origin waits for a forward's answer: `forwardTimeoutMs`, unless the request's own run
 * (its uncached prefill plus `maxTokens` of decode at our measured ms per output token) leaves it
 * less than peer trust's slack (answerSlack × run > the timeout) — then what that slack allows such a
 * run (answerSlack × run + answerSlackMs). A fixed timeout near or under the run gives a long
 * generation up mid-run, again at every fallback, holding an engine per attempt; short requests keep
 * the configured timeout exactly.
 */
export function forwardTimeoutFor(config: NodeConfig, request: EngineRequest, k: LearnedCosts): number {
  const runMs = expectedRunMs(k, request.tokens.length, request.maxTokens, k.msPerOutput ?? 0);
  const slack = config.answerSlack * runMs;
  if (!(slack > config.forwardTimeoutMs)) return config.forwardTimeoutMs;
  return Math.min(MAX_FORWARD_TIMEOUT_MS, slack + config.answerSlackMs);
}
