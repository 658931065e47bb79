/**
 * Answering: the one reply each of the origin's requests gets, and the records it leaves — our local
 * run's result or failure, a peer's answer (current, or late while nothing else started on it), the
 * client that hung up (settled unreplied), the model nobody serves. Each settles the request, ends
 * its hedge (hedging.ts) and feeds what the answer teaches: decode pace, RTT, prefill, trust, spot
 * checks.
 *
 * Part of the origin role: origin.ts owns the pending requests and the peer state this acts on, and
 * decides what follows (node.ts's optimistic insert, the next candidate).
 */
import type { EngineResult, Tokens } from "../engine.js";
import { invariant } from "../invariant.js";
import { keyTokens } from "../namespace.js";
import type { GoneClients, GoneStage } from "./client-gone.js";
import type { ForwardAcks } from "./forward-acks.js";
import { attemptKey, type ForwardAttempts } from "./forward-attempts.js";
import { type AnsweredRuns, hedgeOf, hedgeOn } from "./hedge.js";
import type { Hedging } from "./hedging.js";
import {
  forwardTimer,
  isCurrentAttempt,
  type LocalRun,
  type Pending,
  type PendingRequests,
} from "./pending-requests.js";
import type { Planner } from "./planner.js";
import { type Answerer, failReply, okReply, retryAfterLeftMs } from "./replies.js";
import type { SpotChecks } from "./spot-check.js";
import type { Targets } from "./targets.js";
import type { Trust } from "./trust.js";
import type {
  Effect,
  GoneReason,
  NodeDeps,
  NodeId,
  PeerMessageOf,
  RunFailure,
  ServedTiming,
} from "./types.js";

/** The origin's counters answering moves. */
export type AnswerCounters = { hedgedAnswers: number } & Record<
  (typeof GONE_COUNTER)[GoneStage] | (typeof DEADLINE_COUNTER)[GoneStage],
  number
>;

/** The origin's parts an answer reads and moves (all owned by origin.ts). */
export interface AnswerParts {
  pending: PendingRequests;
  answeredRuns: AnsweredRuns;
  gone: GoneClients;
  planner: Planner;
  targets: Targets;
  acks: ForwardAcks;
  trust: Trust;
  spot: SpotChecks;
  hedging: Hedging;
  attempts: ForwardAttempts;
  counters: AnswerCounters;
  deps: NodeDeps;
  /** Who signs the replies (origin.ts `by`): the policy may change at run time. */
  by: () => Answerer;
}

export class Answering {
  constructor(private readonly o: AnswerParts) {}

  /** This node does not serve the request's model and no peer serving it took it: it fails. */
  refuseUnserved(run: LocalRun, now: number, out: Effect[]): void {
    const p = this.o.pending.settle(run.reqId);
    this.o.hedging.end(p, out);
    const why = `no reachable node serves model '${run.request.model}'`;
    out.push(failReply(this.o.by(), run.reqId, run.request, now, why, "unserved", p));
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
    const p = this.o.pending.find(reqId);
    if (p === undefined) return undefined;
    let stage: GoneStage;
    if (p.current !== undefined) {
      // Neither a timeout nor a failure of the peer: its timers go, its peer gets the cancel. Unless
      // past its first deadline (kept open by streamed output): late already, marked as that
      // deadline would have marked it, as an answer then would be (trust.ts).
      const now = this.o.deps.now();
      const { acks, trust } = this.o;
      if (acks.pastFirstDeadline(p, now)) trust.late(p.current, attemptKey(p), now);
      this.o.attempts.end(p, out, true, true, false);
      stage = "forwarded";
    } else if (p.failedHere !== undefined) {
      stage = "running"; // its run here failed already: only its hedge was left
    } else {
      const local = dropLocal(reqId);
      invariant(local !== undefined, () => `${reqId} is pending here, yet neither queued nor running`);
      // Running: it completes unreplied (or is aborted: abort-runs.ts), as one a hedge answered does.
      if (local === "running") this.o.answeredRuns.add(p);
      stage = local;
    }
    this.o.hedging.end(p, out);
    this.o.pending.settle(reqId);
    this.o.gone.add(reqId);
    this.o.counters[GONE_COUNTER[stage]]++;
    if (reason === "deadline") this.o.counters[DEADLINE_COUNTER[stage]]++;
    return stage;
  }

  /** Our local run of the request finished: its reply. */
  completeLocal(run: LocalRun, result: EngineResult, timing: ServedTiming, now: number, out: Effect[]): void {
    if (this.o.answeredRuns.take(run.reqId, run.attempt)) return void this.o.planner.learnDecode(result);
    const p = this.o.pending.settleLocal(run);
    this.o.hedging.end(p, out);
    this.o.planner.learnDecode(result);
    this.provenWrong(p, now);
    out.push(okReply(this.o.by(), p, result, timing, 0, now));
  }

  /**
   * `p` was served after peers said its prompt was bad (`refusedBy`): each is backed off as a peer
   * refusing for load is — its engine cannot run what another could, or it lied.
   */
  private provenWrong(p: Pending, now: number): void {
    for (const id of p.refusedBy ?? []) this.o.trust.refused(id, now);
  }

  /** Our local run of the request was aborted (abort-runs.ts): it had gone unanswered already. */
  abortedLocal(run: LocalRun): void {
    invariant(this.o.answeredRuns.take(run.reqId, run.attempt), () => `${run.reqId} aborted while wanted`);
  }

  /**
   * Our local run of the request failed: the request fails, by whose fault — the prompt refused
   * (`invalid`, a 400), our engine's load (`unavailable`, a 503 with its wait), else `engine`. Not,
   * but for a prompt refused (the peer's engine would refuse it too), while its hedge's peer may still
   * answer: it waits on that peer (`failHeld` if that leg fails too).
   */
  failLocal(run: LocalRun, f: RunFailure, now: number, out: Effect[]): void {
    if (this.o.answeredRuns.take(run.reqId, run.attempt)) return;
    const held = this.o.pending.get(run.reqId);
    if (f.fault !== "input" && this.o.hedging.live(held)) {
      const code = f.fault === "load" ? "unavailable" : "engine";
      const retryAfterMs = f.fault === "load" ? f.retryAfterMs : undefined;
      held.failedHere = { error: `engine: ${f.error}`, code, retryAfterMs, at: now };
      return;
    }
    const p = this.o.pending.settleLocal(run);
    this.o.hedging.end(p, out);
    const code = f.fault === "input" ? "invalid" : f.fault === "load" ? "unavailable" : "engine";
    const wait = f.fault === "load" ? f.retryAfterMs : undefined;
    out.push(failReply(this.o.by(), run.reqId, run.request, now, `engine: ${f.error}`, code, p, wait));
  }

  /**
   * A request whose run here failed (`failedHere`) lost its hedge too: it fails now, as its run did.
   * A 503's wait ran from the engine's refusal: the time held since is gone from it.
   */
  failHeld(p: Pending, out: Effect[]): void {
    const f = p.failedHere;
    if (f === undefined || this.o.pending.find(p.reqId) !== p) return;
    this.o.pending.settle(p.reqId);
    this.o.hedging.end(p, out);
    const now = this.o.deps.now();
    const wait = f.retryAfterMs === undefined ? undefined : retryAfterLeftMs(f.retryAfterMs, now - f.at);
    out.push(failReply(this.o.by(), p.reqId, p.request, now, f.error, f.code, p, wait));
  }

  /**
   * An answer to the current attempt from a peer spot checks quarantined while it ran (caught
   * answering wrong since it was chosen): not taken, as on every late path; the attempt ends as an
   * error would end it (true: node.ts moves on), and routing no longer picks that peer.
   */
  refuseQuarantined(from: NodeId, msg: PeerMessageOf<"result">, out: Effect[]): boolean {
    const p = this.o.pending.find(msg.reqId);
    if (!this.o.trust.quarantined(from) || !p || !isCurrentAttempt(p, from, msg.attempt)) return false;
    this.o.attempts.fallback(p, out, true, false);
    return true;
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
    takeQueued: (reqId: string) => boolean,
    abortRun: (reqId: string) => void,
  ): Tokens | undefined {
    const { pending, acks, targets } = this.o;
    const current = this.o.attempts.current(pending.find(msg.reqId), from, msg);
    const p = current ?? this.lateAnswered(from, msg, out, takeQueued, abortRun);
    if (!p) return undefined;
    out.push({ type: "cancel-timer", timer: forwardTimer(p) });
    acks.disarm(p, out);
    // The hedge's own peer answered: nothing of it to cancel.
    this.o.hedging.end(p, out, !hedgeOn(p.hedge, from, msg.attempt));
    targets.landed(from, p.reqId, msg.attempt);
    pending.settle(p.reqId);
    // A late answer's attempt ended already (trust counted it then, and its progress just now). One
    // past its first deadline, kept open by streamed output, counts as that deadline would have.
    if (current && acks.pastFirstDeadline(p, now)) this.o.trust.answeredLate(from, attemptKey(p), now);
    else if (current) this.o.trust.answered(from, attemptKey(p));
    this.o.planner.learnDecode(msg.result);
    this.o.spot.offer(from, p.request, msg.result.text, this.o.deps.random);
    const { timing } = msg;
    const remote = timing.queueMs + timing.prefillMs + timing.decodeMs;
    // After a probe the answer may be a re-sent one, and a late one is older: no round trip either.
    if (current && p.probes === 0) targets.sampleRtt(from, now - p.attemptSentAt - remote);
    const r = msg.result;
    targets.samplePrefill(from, timing.prefillMs, Math.max(0, r.promptTokens - r.cachedTokens));
    this.provenWrong(p, now);
    out.push(okReply(this.o.by(), p, msg.result, { ...timing, servedBy: from }, 1, now));
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
    const { attempts } = this.o;
    const p = this.o.pending.find(msg.reqId);
    // Counted once: as a hedged answer (below), else as a late reply, whether it answers or is dropped.
    if (!p?.abandoned?.some((a) => a.to === from && a.attempt === msg.attempt))
      return attempts.late(undefined);
    // A peer spot checks quarantined since (caught answering wrong): its late answer is not taken.
    if (this.o.trust.quarantined(from)) return attempts.late(undefined);
    if (p.current === undefined) {
      if (takeQueued(p.reqId)) return attempts.late(p);
      // It runs here already: its hedge's answer is the reply, and the run completes unreplied.
      if (!hedgeOn(hedgeOf(p), from, msg.attempt)) return attempts.late(undefined);
      // Not for a stream our run may have begun already (hedge.ts): that run answers.
      if (p.request.stream === true) {
        this.o.hedging.end(p, out, false);
        return attempts.late(undefined);
      }
      // Unless that run failed already (`failedHere`): nothing of it is left to go unreplied.
      if (p.failedHere === undefined) {
        this.o.answeredRuns.add(p);
        abortRun(p.reqId);
      }
      this.o.counters.hedgedAnswers++;
      return p;
    }
    // Answered, not a fallback: the other attempt is only cancelled.
    return attempts.late(attempts.end(p, out, true, true, false));
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
