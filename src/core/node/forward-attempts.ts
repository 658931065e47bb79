/**
 * Forward attempts: one of the origin's requests at one peer, from the forward to its end — its ack,
 * its timers, the peer's error, the peer's restart or goodbye — and what each outcome earns the peer
 * (trust.ts, peer-limits.ts). An attempt ends once, and only then may the next begin. Moving on sends
 * the abandoned target a `cancel` (put off while a hedge may still take its answer: hedge.ts) and
 * keeps the attempt as abandoned, owed a final cancel (abort-runs.ts).
 *
 * Part of the origin role: origin.ts owns the pending requests and the peer state this acts on,
 * looks the request up and decides what follows (the next candidate, a local run, the reply).
 */
import { invariant } from "../invariant.js";
import { owedCancels } from "./abort-runs.js";
import type { ForwardAcks } from "./forward-acks.js";
import { hedgeOn } from "./hedge.js";
import type { Hedging } from "./hedging.js";
import { isLoadRefusal } from "./load-refusal.js";
import { exceedsLimits, type PeerLimits, saidLimits } from "./peer-limits.js";
import {
  type Abandoned,
  forwardTimer,
  isCurrentAttempt,
  MAX_ABANDONED,
  type Pending,
  type PendingRequests,
} from "./pending-requests.js";
import { DUPLICATE_HANDLED, FORWARD_CANCELLED } from "./serving.js";
import type { Targets } from "./targets.js";
import type { Trust } from "./trust.js";
import {
  type Effect,
  MAX_REQ_ID,
  type NodeId,
  type PeerMessage,
  type PeerMessageOf,
  PROMPT_TEXT_NEEDED,
  type Timer,
} from "./types.js";

/** A peer's errors that follow the protocol, not a fault of the peer: they never count against it. */
const PROTOCOL_REFUSALS = new Set([FORWARD_CANCELLED, DUPLICATE_HANDLED, PROMPT_TEXT_NEEDED]);

/** The origin's counters an attempt moves. */
export interface AttemptCounters {
  forwarded: number;
  fallbacks: number;
  lateReplies: number;
  ackTimeouts: number;
  probes: number;
  resends: number;
  ignoredAcks: number;
  invalidMessages: number;
  overdueAnswers: number;
  forwardTimeouts: number;
  peerErrors: number;
}

type Answer = Extract<PeerMessage, { type: "result" | "error" }>;

export class ForwardAttempts {
  constructor(
    /** Config `answerRecovery`: a peer that acked and went silent is hedged on. */
    private readonly answerRecovery: boolean,
    private readonly targets: Targets,
    private readonly trust: Trust,
    private readonly limits: PeerLimits,
    private readonly acks: ForwardAcks,
    private readonly hedging: Hedging,
    private readonly counters: AttemptCounters,
    private readonly now: () => number,
  ) {}

  private readonly reachable = (id: NodeId): boolean => this.targets.get(id) !== undefined;

  /** A new attempt of `p` at `to` (a member): send it, arm its timers. */
  begin(p: Pending, to: NodeId, now: number, out: Effect[]): void {
    const peer = this.targets.get(to);
    invariant(peer !== undefined, () => `forwarding to ${to}, which is not a member`);
    // Attempts count up, one per forward, and each earlier one ended in exactly one fallback.
    invariant(p.attempt === p.fallbacks, "a forward attempt began before the last one ended");
    p.attempt++;
    p.current = to;
    this.acks.begin(p, now);
    this.targets.sent(to, p.reqId, p.attempt, now);
    this.trust.sent(to, attemptKey(p), now);
    this.counters.forwarded++;
    this.acks.send(p, to, peer, now, out);
    out.push({ type: "set-timer", timer: forwardTimer(p), delayMs: p.forwardTimeoutMs });
  }

  /**
   * The current attempt failed: count it (node.ts moves on). `cancel` tells the abandoned target to
   * drop the job if still queued (timeout, suspicion, send failure: it may hold it yet); not sent
   * when it answered an error, departed, restarted or left the membership (nothing to drop, or
   * nobody), and put off while a hedge on that attempt may still want its answer (hedging.ts `end`).
   */
  fallback(
    p: Pending,
    out: Effect[],
    cancelTimer: boolean,
    cancel: boolean,
    timedOut = cancel,
    left = false,
  ): void {
    this.end(p, out, cancelTimer, cancel, timedOut, left);
    p.fallbacks++;
    this.counters.fallbacks++;
  }

  /** The current attempt ends (fallback's work bar the count: a late answer ends it answered). */
  end(
    p: Pending,
    out: Effect[],
    cancelTimer: boolean,
    cancel: boolean,
    timedOut: boolean,
    left = false,
  ): Pending {
    if (cancelTimer) out.push({ type: "cancel-timer", timer: forwardTimer(p) });
    this.acks.disarm(p, out);
    if (cancel && !hedgeOn(p.hedge, p.current, p.attempt) && p.current !== undefined)
      out.push({ type: "send", to: p.current, msg: { type: "cancel", reqId: p.reqId, attempt: p.attempt } });
    if (p.current !== undefined) this.targets.landed(p.current, p.reqId, p.attempt);
    // Abandoned, not answered: its answer may still come, and answers the request if it still waits.
    if ((cancel || left) && p.current !== undefined) {
      p.abandoned ??= [];
      const a: Abandoned = { to: p.current, attempt: p.attempt, epoch: p.ackEpoch };
      if (left) a.left = true;
      p.abandoned.push(a);
      // Bounded (offload may move a request again and again): the oldest beyond the bound is given
      // up for good, its answer no longer taken, so its final cancel goes now.
      if (p.abandoned.length > MAX_ABANDONED)
        owedCancels({ reqId: p.reqId, abandoned: p.abandoned.splice(0, 1) }, this.reachable, out);
    }
    // Abandoned (a timeout, silence, a failed send) rather than answered: time lost to the network.
    if (timedOut) p.timeouts++;
    // Whatever ended the attempt, it is no longer open to trust (an outcome was noted first).
    if (p.current !== undefined) this.trust.ended(p.current, attemptKey(p));
    return p;
  }

  /**
   * A forward or ack timer of `p` (undefined: no longer pending) fired. Returns true when the
   * attempt is abandoned (node.ts moves on); a timer of an attempt we moved on from never acts on
   * the current one.
   */
  onTimer(
    p: Pending | undefined,
    timer: Extract<Timer, { kind: "forward" | "ack" }>,
    now: number,
    out: Effect[],
  ): boolean {
    invariant(p === undefined || timer.attempt <= p.attempt, "a timer for an attempt not yet made");
    if (p?.current === undefined || p.attempt !== timer.attempt) return false;
    if (timer.kind === "forward") {
      this.counters.forwardTimeouts++;
      this.trust.failed(p.current, attemptKey(p), now);
      this.fallback(p, out, false, true);
      return true;
    }
    return p.ackArmed && this.onAckTimer(p, now, out);
  }

  /** The ack timer of the current attempt fired: act on forward-acks.ts's verdict (true: moved on). */
  private onAckTimer(p: Pending, now: number, out: Effect[]): boolean {
    const to = p.current as NodeId;
    if (this.acks.ackedByOutput(p, to, p.expect[p.next - 1], now, out)) return false;
    const verdict = this.acks.onTimer(p, to, now, out);
    if (verdict === "probe" || verdict === "resend") {
      this.counters[verdict === "probe" ? "probes" : "resends"]++;
      return false;
    }
    if (verdict === "overdue") this.counters.overdueAnswers++;
    else this.counters.ackTimeouts++;
    // A stalled peer, or one silent since its ack, owes the answer: held against it. A never-acked
    // attempt says nothing of the peer (trust.ts): the forward or its ack may be lost on the way,
    // and a peer that hears nothing of ours goes silent and is suspected; it only hints at a peer
    // that does not ack. A half-open probe is the exception: a demoted peer that does not ack it
    // stays demoted (else every next request would probe it, each costing an ack timeout).
    const key = attemptKey(p);
    const held = verdict === "unacked" ? this.trust.isProbe(to, key) : verdict !== "gone";
    if (verdict === "unacked") this.targets.abandonedUnacked(to, p.reqId, p.attempt);
    if (held) this.trust.failed(to, key, now);
    // Acked, then silent or overdue: it holds the job or its answer (or stalls), and answer recovery
    // asks it again should the request end up running here (hedge.ts). Greedy decoding only: a
    // sampled answer could not continue what our own run may have streamed already.
    // Its job is not cancelled then (a stalled peer may still answer it), only once the hedge ends;
    // an earlier silent peer's hedge ends now (cancelled).
    const owes = verdict === "silent" || verdict === "overdue";
    if (owes && this.answerRecovery && (p.request.temperature ?? 0) === 0) this.hedging.begin(p, to, out);
    // An overdue answer is the peer's failure (trust's business), not the network's: no timeout.
    this.fallback(p, out, true, true, verdict !== "overdue");
    return true;
  }

  /** Output of `p`'s forward streamed in from `from`: only its current target's counts. */
  onOutput(p: Pending | undefined, from: NodeId, now: number): void {
    if (p !== undefined && p.current === from) this.acks.streamed(p, now);
  }

  /**
   * A `forward-ack` arrived. Any ack shows the peer acks (so its forwards are held to the ack
   * timeout). For the current, not yet acked attempt: wait for the answer until its ETA (with margin,
   * doubling per probe) before probing; without an ETA, the forward timeout alone bounds the wait.
   * True when the ack came from an incarnation older than a restart seen meanwhile (origin.ts
   * `lostTo`): the job went with it, and node.ts fails the attempt over.
   */
  onAck(from: NodeId, msg: PeerMessageOf<"forward-ack">, pending: PendingRequests, out: Effect[]): boolean {
    const { reqId, attempt, etaMs } = msg;
    if (typeof reqId !== "string" || reqId.length > MAX_REQ_ID || !Number.isInteger(attempt)) {
      this.counters.invalidMessages++;
      return false;
    }
    this.targets.acked(from, reqId, attempt);
    const p = pending.find(reqId);
    // Even a repeated ack: a re-send may have reached a new incarnation, which holds the job now.
    if (p !== undefined && isCurrentAttempt(p, from, attempt))
      p.ackEpoch = newestEpoch(p.ackEpoch, msg.epoch);
    else if (p !== undefined) ackedEarlier(p, from, attempt, msg.epoch);
    if (!p || !isCurrentAttempt(p, from, attempt) || p.ackedAt === p.probes) {
      this.counters.ignoredAcks++;
      return false;
    }
    if (p.restartEpoch !== undefined && lostIn(p.ackEpoch, p.restartEpoch)) return true;
    this.acks.acked(p, from, etaMs, p.expect[p.next - 1], this.now(), out);
    return false;
  }

  /**
   * An `error` from a peer about `p` (undefined: not pending). The peer a hedge asks dropped that
   * job: no more asking. For the current attempt, fall back (true: node.ts moves on); else late.
   */
  onError(p: Pending | undefined, from: NodeId, msg: PeerMessageOf<"error">, out: Effect[]): boolean {
    if (p !== undefined && hedgeOn(p.hedge, from, msg.attempt)) this.hedging.stop(p, out, false);
    const q = this.current(p, from, msg);
    if (!q) return this.late(false);
    // Busy is honest (a back-off only, bar a late stream's: `endsLate`); our own protocol's refusals
    // say nothing of the peer, nor does a refusal of what exceeds its limits (kept: what does not fit
    // goes elsewhere from now on).
    // A prompt its engine refused falls back like any error: a peer's word cannot end a request (a
    // lying peer would fail every one so); it is held against the peer only if the request is then
    // served elsewhere (answering.ts), so a prompt every engine refuses backs no honest peer off.
    const limits = saidLimits(msg);
    if (limits !== undefined && exceedsLimits(q.request, limits)) this.limits.learn(from, limits);
    else if (msg.fault === "input") q.refusedBy = [...(q.refusedBy ?? []), from];
    else if (msg.fault === "load" || isLoadRefusal(msg.error)) {
      this.trust.refused(from, this.now());
      this.endsLate(q, this.now());
    } else if (!PROTOCOL_REFUSALS.has(msg.error)) {
      this.counters.peerErrors++;
      this.trust.failed(from, attemptKey(q), this.now());
    }
    // The peer (or the stream carrying its answer) ended this attempt itself: nothing to cancel.
    this.fallback(q, out, true, false);
    return true;
  }

  /**
   * `peer` restarted, or is back from gone in a newer epoch than it left in (full mesh: its acks name
   * no epoch), so whether its old or new process acked our forwards to it is unknown: each is sent
   * again now, as a probe. The new process acks again what it holds (its duplicate window), and runs
   * what it lacks.
   */
  resendTo(pending: Iterable<Pending>, peer: NodeId, now: number, out: Effect[]): void {
    const target = this.targets.get(peer);
    for (const p of pending) {
      if (target === undefined || p.current !== peer) continue;
      this.counters[p.ackedAt === p.probes ? "probes" : "resends"]++;
      p.probes++;
      this.acks.send(p, peer, target, now, out);
    }
  }

  /**
   * Requests whose current attempt `peer` lost: every one when it left or is down (no `epoch`); when
   * it is seen back at `epoch`, those an older incarnation acked (`lostIn`).
   * The epoch that shows a restart may be relayed, and the first one heard of a member may be an
   * old one: its current epoch then reads as a restart, and only the ack's own epoch tells whether
   * the job went with it. One not acked yet is left to its ack timeout (a new incarnation that gets
   * a re-send acks it), unless no ack wait covers it; an older incarnation's ack still on its way
   * fails it then (`onAck`).
   */
  lostTo(pending: Iterable<Pending>, peer: NodeId, epoch?: number): string[] {
    const out: string[] = [];
    for (const p of pending) {
      if (p.current !== peer) continue;
      if (epoch !== undefined && p.ackedAt < 0 && p.ackArmed) {
        p.restartEpoch = Math.max(p.restartEpoch ?? epoch, epoch);
        continue;
      }
      if (p.ackedAt < 0 || lostIn(p.ackEpoch, epoch)) out.push(p.reqId);
    }
    return out;
  }

  /**
   * `peer` said goodbye and drains (it runs what it took, then exits): the requests whose current
   * attempt it holds move on without a cancel (it drains or hands the work back itself), but every
   * attempt at it is kept as abandoned and marked `left`, owed its final cancel once no answer of it
   * can be taken, though the peer is no member any more. Unless `answers` (node.ts still takes its
   * messages: the full mesh), none can be taken already, so those cancels go now. Returns the
   * requests to move on.
   */
  departed(pending: Iterable<Pending>, peer: NodeId, out: Effect[], answers: boolean): string[] {
    const moved: string[] = [];
    const now = this.now();
    for (const p of pending) {
      for (const a of p.abandoned ?? []) if (a.to === peer) a.left = true;
      if (p.current === peer) {
        this.endsLate(p, now);
        this.fallback(p, out, true, false, false, true);
        moved.push(p.reqId);
      }
      if (!answers) owedCancels(p, this.reachable, out, (a) => a.to === peer);
    }
    return moved;
  }

  /**
   * The current attempt of `p` ends by its peer's own word, not ours, and with no mark of its own (a
   * refusal for load, a goodbye): past its first deadline, kept open by its streamed output, it was
   * late already, and is marked as its answer then would be (trust.ts `late`, once per attempt).
   * Its load back-off stands too.
   */
  private endsLate(p: Pending, now: number): void {
    if (p.current !== undefined && this.acks.pastFirstDeadline(p, now))
      this.trust.late(p.current, attemptKey(p), now);
  }

  /** An answer to an attempt no longer current: counted (`lateReplies`). */
  late<T>(v: T): T {
    this.counters.lateReplies++;
    return v;
  }

  /**
   * `p` (the pending request `msg` names, if any), if `msg` answers its current attempt (else the
   * caller counts it late).
   */
  current(p: Pending | undefined, from: NodeId, msg: Answer): Pending | undefined {
    if (p && isCurrentAttempt(p, from, msg.attempt)) return p;
    // A late result still shows the peer getting through its work.
    if (msg.type === "result") this.trust.progressed(from);
    this.targets.lateAnswer(from, msg.reqId, msg.attempt);
    // Its peer is done with that attempt (answered or dropped it): it is owed no final cancel.
    for (const a of p?.abandoned ?? []) if (a.to === from && a.attempt === msg.attempt) a.done = true;
    return undefined;
  }
}

/**
 * Whether a forward a peer acked in `acked` went with its restart seen at `epoch` (undefined: it left
 * or is down, every job went). Only an ack naming an older epoch is the gone incarnation's: one naming
 * none (implied by a streaming answer's first chunk, or an older peer's) may be the new one's, and
 * failing it over would run it twice; the gone one's stream breaks, or the answer's probe finds it
 * unknown, and that fails it over.
 */
function lostIn(acked: number | undefined, epoch: number | undefined): boolean {
  return epoch === undefined || (acked !== undefined && acked < epoch);
}

/**
 * An ack of an attempt no longer current (a hedge's re-ask, a late one): the epoch it names is the
 * incarnation holding the job now, for the hedge (hedging.ts `endTo`) and the cancel it is owed.
 */
function ackedEarlier(p: Pending, from: NodeId, attempt: number, epoch: unknown): void {
  if (hedgeOn(p.hedge, from, attempt) && p.hedge) p.hedge.epoch = newestEpoch(p.hedge.epoch, epoch);
  for (const a of p.abandoned ?? [])
    if (a.to === from && a.attempt === attempt) a.epoch = newestEpoch(a.epoch, epoch);
}

/** The newer of a held ack epoch and a peer's (a peer-controlled value: only a whole, non-negative one). */
function newestEpoch(held: number | undefined, said: unknown): number | undefined {
  if (typeof said !== "number" || !Number.isSafeInteger(said) || said < 0) return held;
  return held === undefined ? said : Math.max(held, said);
}

/** Names one of our forward attempts to trust (unique among this node's open attempts). */
export function attemptKey(p: Pending): string {
  return `${p.reqId}\u0000${p.attempt}`;
}
