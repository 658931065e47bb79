/**
 * Serving: the forwards this node runs for peers. It refuses what it must at once (hop limit, a bad
 * prompt, overload, a deadline it cannot meet) with a retryable error, so the origin falls back now
 * rather than at its timeout; it keeps the duplicate window, so a forward is never run twice (a copy
 * or a probe is acked again, or answered again from the recent answers when probes or answer
 * recovery are on); and it
 * sends the one answer each forward gets. Two rules a transport would otherwise make up live here
 * too: acks may be held back a moment (`ackDeferMs`) and dropped when the answer leaves first, and a
 * forward without the prompt text is refused while this node's engine needs it (`needsPromptText`).
 * Whether a job for a forward waits or runs is the executor's business: node.ts asks it and hands
 * this role the answer.
 */
import type { EngineResult } from "../engine.js";
import { invariant } from "../invariant.js";
import { requestProblem } from "../namespace.js";
import type { NodeConfig } from "./config.js";
import { servesModel } from "./models.js";
import {
  type Effect,
  MAX_REQ_ID,
  type NodeId,
  type PeerMessage,
  type PeerMessageOf,
  PROMPT_TEXT_NEEDED,
  type RunFailure,
  type ServedTiming,
  type Timer,
} from "./types.js";

/** Answers kept to re-send to an origin probing for one it lost (also dropped after forwardTimeoutMs). */
const MAX_RECENT_ANSWERS = 256;
/**
 * A forward is refused only when its expected wait exceeds the origin's budget by this factor: the
 * refused request goes to the origin's own (often as long) queue with a cache miss, so only sure
 * timeouts are worth refusing (BENCHMARKS.md, "Cancelled forwards and the forward deadline").
 */
const DEADLINE_SLACK = 1.25;

const ACKS_TIMER: Timer = { kind: "acks" };

/** The error a copy of an already-handled forward gets when no answer is kept to send again. */
export const DUPLICATE_HANDLED = "duplicate forward: this attempt was already handled (no answer kept)";
/** The error a forward gets when its origin cancelled it before it ran. */
export const FORWARD_CANCELLED = "cancelled by origin";

/** The forward a job serves: whom to answer, and the key it is known by here. */
export interface ServedForward {
  reqId: string;
  from: NodeId | undefined;
  attempt: number;
  key?: string;
}

/** What node.ts does with a forward this role has let through. */
/** The executor's load as a forward arrives (executor.ts `loadNow`). */
export interface ServingLoad {
  /** The queue bound is reached. */
  full: boolean;
  /** Mean-based expected wait (what a forward's deadline is judged by). */
  expectedWaitMs: number | undefined;
  /** Queue-aware wait of a job queued now (`maxWaitMs` bounds it). */
  admissionWaitMs: number | undefined;
}

export type ForwardVerdict = { kind: "accept"; key: string } | { kind: "duplicate"; key: string };

export interface ServingCounters {
  duplicateForwards: number;
  cancelledForwards: number;
  resentAnswers: number;
  rejectedDeadline: number;
  rejectedOverload: number;
  invalidMessages: number;
  promptTextRefused: number;
}

export class Serving {
  /** Forward keys seen, answered, or cancelled before their forward arrived (drop it then). */
  private readonly seen = new Map<string, "seen" | "answered" | "cancelled">();
  /** Answers we sent for forwards, by key, to re-send to a probing origin (bounded). */
  private readonly recentAnswers = new Map<string, { msg: PeerMessage; at: number }>();
  /** Acks held back (`ackDeferMs`), by forward key; in the order they fall due (one fixed delay). */
  private readonly deferred = new Map<string, { due: number; to: NodeId; msg: PeerMessage }>();
  counters!: ServingCounters;

  /** Our epoch, said in every ack: the origin tells this incarnation's jobs from an older one's. */
  private epoch = 0;

  constructor(private readonly config: NodeConfig) {
    this.reset();
  }

  reset(epoch = 0): void {
    this.epoch = epoch;
    this.seen.clear();
    this.recentAnswers.clear();
    this.deferred.clear();
    this.counters = {
      duplicateForwards: 0,
      cancelledForwards: 0,
      resentAnswers: 0,
      rejectedDeadline: 0,
      rejectedOverload: 0,
      invalidMessages: 0,
      promptTextRefused: 0,
    };
  }

  /** Answers are kept to send again to an origin probing for one it lost (answer probes or recovery). */
  private get keepsAnswers(): boolean {
    return this.config.answerProbes || this.config.answerRecovery;
  }

  /** Acks carry an ETA (which costs a tree match) only when origins may probe us. */
  get wantsEta(): boolean {
    return this.config.answerProbes;
  }

  /**
   * A forward arrived. Refusals and drops are answered here (undefined: nothing more to do); a
   * forward seen before is a `duplicate` (node.ts looks for its job); else it is accepted: node.ts
   * acks it and queues it. `load` is the executor's figures right now (`admissionWaitMs`, its
   * queue-aware wait, is what `maxWaitMs` bounds for forwards as for our own clients).
   */
  admit(
    from: NodeId,
    msg: PeerMessageOf<"forward">,
    load: ServingLoad,
    out: Effect[],
  ): ForwardVerdict | undefined {
    const { reqId, attempt, request, deadlineMs } = msg;
    const { full, expectedWaitMs, admissionWaitMs } = load;
    if (reqId.length > MAX_REQ_ID) {
      this.counters.invalidMessages++;
      return undefined;
    }
    if (this.config.needsPromptText && request.prompt === undefined) {
      // Not remembered as seen: the origin re-sends this very forward with the text.
      this.counters.promptTextRefused++;
      out.push(this.dropped(from, reqId, attempt, PROMPT_TEXT_NEEDED));
      return undefined;
    }
    const key = forwardKey(from, reqId, attempt);
    const seen = this.seen.get(key);
    if (seen !== undefined) {
      if (seen !== "cancelled") {
        this.counters.duplicateForwards++;
        return { kind: "duplicate", key };
      }
      // Its cancel overtook it: the origin has moved on, so it is dropped, and said so.
      this.counters.cancelledForwards++;
      this.seen.set(key, "seen");
      out.push(this.dropped(from, reqId, attempt, FORWARD_CANCELLED));
      return undefined;
    }
    this.remember(key, "seen");
    let refusal: string | undefined;
    const problem = requestProblem(request, this.config.maxPromptTokens);
    if (msg.hops > this.config.maxHops) refusal = "hop limit exceeded";
    else if (problem !== undefined) refusal = `bad request: ${problem}`;
    else if (!servesModel(this.config.models, request.model))
      refusal = `model '${request.model}' is not served here`;
    else if (full) {
      this.counters.rejectedOverload++;
      refusal = "overloaded";
    } else if (
      admissionWaitMs !== undefined &&
      admissionWaitMs > waitBound(this.config.maxWaitMs, msg.waitMs)
    ) {
      // Our bound holds for every request we queue, and the origin's for its own (what is left of it):
      // accepted past either, it would wait longer than allowed. The origin falls back.
      this.counters.rejectedOverload++;
      const bound = waitBound(this.config.maxWaitMs, msg.waitMs);
      refusal = `overloaded: expected wait ${Math.ceil(admissionWaitMs)} ms exceeds ${bound} ms`;
    } else if (typeof deadlineMs === "number" && Number.isFinite(deadlineMs) && deadlineMs >= 0) {
      // A peer-controlled number: anything but a finite non-negative budget means "no deadline".
      if (expectedWaitMs !== undefined && expectedWaitMs > deadlineMs * DEADLINE_SLACK) {
        // It could not even start before the origin gives up: it would wait out the whole timeout.
        this.counters.rejectedDeadline++;
        refusal = `deadline: expected to start in ${Math.ceil(expectedWaitMs)} ms, origin waits ${deadlineMs} ms`;
      }
    }
    if (refusal !== undefined) {
      out.push(this.dropped(from, reqId, attempt, refusal));
      return undefined;
    }
    return { kind: "accept", key };
  }

  /**
   * A `forward-ack` for an accepted forward (or a copy whose job still waits or runs); with answer
   * probes it carries the ETA the origin times its probes by. With `ackDeferMs` it waits that long
   * and goes only if the forward has not been answered by then.
   */
  ack(
    to: NodeId,
    reqId: string,
    attempt: number,
    key: string,
    etaMs: number | undefined,
    now: number,
    out: Effect[],
  ): void {
    const msg: PeerMessage = { type: "forward-ack", reqId, attempt };
    // Only gossip relays epochs, so only there can a stale one pass for a restart (forward-attempts.ts
    // `lostTo`); the full mesh hears each peer's epoch from that peer alone.
    if (this.config.gossip !== "full") msg.epoch = this.epoch;
    if (etaMs !== undefined) msg.etaMs = Math.ceil(etaMs);
    const defer = this.config.ackDeferMs;
    if (!(defer > 0)) {
      out.push({ type: "send", to, msg });
      return;
    }
    const waiting = this.deferred.get(key);
    if (waiting) {
      waiting.msg = msg; // a copy's fresher ETA; still due when the first ack was
      return;
    }
    this.deferred.set(key, { due: now + defer, to, msg });
    if (this.deferred.size === 1) out.push({ type: "set-timer", timer: ACKS_TIMER, delayMs: defer });
  }

  /** The deferred acks' timer: the acks now due leave; the timer is armed again for the next one. */
  onAcksTimer(now: number, out: Effect[]): void {
    for (const [key, a] of this.deferred) {
      if (a.due > now) break;
      this.deferred.delete(key);
      out.push({ type: "send", to: a.to, msg: a.msg });
    }
    const next = this.deferred.values().next().value;
    if (next) out.push({ type: "set-timer", timer: ACKS_TIMER, delayMs: Math.max(0, next.due - now) });
  }

  /** The forward is answered: an ack still held back for it is not needed any more. */
  private dropAck(key: string | undefined, out: Effect[]): void {
    if (key === undefined || !this.deferred.delete(key)) return;
    if (this.deferred.size === 0) out.push({ type: "cancel-timer", timer: ACKS_TIMER });
  }

  /**
   * A copy of a forward whose job no longer waits or runs: re-send its answer if one is kept, else
   * say it was handled, so the copy ends now — its sender falls back, if it still waits — rather
   * than at its timeout.
   */
  handled(to: NodeId, reqId: string, attempt: number, key: string, now: number, out: Effect[]): void {
    this.dropAck(key, out);
    const answer = this.keepsAnswers ? this.recentAnswers.get(key) : undefined;
    if (answer && now - answer.at <= this.config.forwardTimeoutMs) {
      this.counters.resentAnswers++;
      out.push({ type: "send", to, msg: answer.msg });
      return;
    }
    out.push(this.dropped(to, reqId, attempt, DUPLICATE_HANDLED));
  }

  /** A `cancel`'s key, or undefined (counted) when its request id is malformed. */
  cancelKey(from: NodeId, reqId: string, attempt: number): string | undefined {
    if (typeof reqId !== "string" || reqId.length > MAX_REQ_ID) {
      this.counters.invalidMessages++;
      return undefined;
    }
    return forwardKey(from, reqId, attempt);
  }

  /** The cancelled forward's job was still queued and is dropped: say so to its origin. */
  cancelled(to: NodeId, reqId: string, attempt: number, key: string, out: Effect[]): void {
    this.counters.cancelledForwards++;
    this.dropAck(key, out);
    out.push(this.dropped(to, reqId, attempt, FORWARD_CANCELLED));
  }

  /**
   * A cancel for a forward with no queued job: it has started (its answer will be dropped at the
   * origin as late), or the cancel overtook it — remembered, so the forward is dropped on arrival.
   */
  cancelAhead(key: string): void {
    if (!this.seen.has(key)) this.remember(key, "cancelled");
  }

  /** The forward's job finished: its answer. */
  answered(job: ServedForward, result: EngineResult, timing: ServedTiming, now: number, out: Effect[]): void {
    this.answer(job, { type: "result", reqId: job.reqId, attempt: job.attempt, result, timing }, now, out);
  }

  /**
   * The forward's engine run failed: a retryable error saying whose fault, so its origin tries its
   * next candidate (a refused prompt included: the origin does not take a peer's word for it).
   */
  failed(job: ServedForward, f: RunFailure, now: number, out: Effect[]): void {
    const msg: PeerMessageOf<"error"> = {
      type: "error",
      reqId: job.reqId,
      attempt: job.attempt,
      error: `engine: ${f.error}`,
      retryable: true,
    };
    if (f.fault !== undefined) msg.fault = f.fault;
    this.answer(job, msg, now, out);
  }

  /** The forward's run was aborted on its origin's final cancel (abort-runs.ts): said so, as a drop. */
  aborted(job: ServedForward, now: number, out: Effect[]): void {
    const { reqId, attempt } = job;
    this.answer(job, { type: "error", reqId, attempt, error: FORWARD_CANCELLED, retryable: true }, now, out);
  }

  /** Sends the answer to a forward and keeps it (bounded) for an origin that may lose it. */
  private answer(job: ServedForward, msg: PeerMessage, now: number, out: Effect[]): void {
    invariant(job.from !== undefined && job.key !== undefined, "a forward's job lost its origin");
    // Exactly once (while the key is in the window): a forward runs once, so it is answered once.
    const state = this.seen.get(job.key);
    invariant(state !== "answered", () => `forward ${job.reqId} attempt ${job.attempt} answered twice`);
    if (state !== undefined) this.seen.set(job.key, "answered");
    this.dropAck(job.key, out);
    if (this.keepsAnswers) {
      this.recentAnswers.set(job.key, { msg, at: now });
      if (this.recentAnswers.size > MAX_RECENT_ANSWERS) {
        this.recentAnswers.delete(this.recentAnswers.keys().next().value as string);
      }
    }
    out.push({ type: "send", to: job.from, msg });
  }

  /**
   * The one reply to a forward this node does not run (refused, cancelled, or a copy of one already
   * handled): a retryable error, so nothing waits on it — the origin, or a transport stream opened
   * for it — until a timeout.
   */
  private dropped(to: NodeId, reqId: string, attempt: number, error: string): Effect {
    return { type: "send", to, msg: { type: "error", reqId, attempt, error, retryable: true } };
  }

  /** Remembers a forward key in the bounded dedup window (oldest forgotten first). */
  private remember(key: string, seen: "seen" | "cancelled"): void {
    if (this.config.dedupWindow === 0) return;
    this.seen.set(key, seen);
    if (this.seen.size > this.config.dedupWindow) this.seen.delete(this.seen.keys().next().value as string);
    invariant(this.seen.size <= this.config.dedupWindow, "the dedup window outgrew its bound");
  }
}

/** Identifies one forward attempt from one peer (dedup window, cancels, answers kept). */
function forwardKey(from: NodeId, reqId: string, attempt: number): string {
  return `${from}\u0000${reqId}\u0000${attempt}`;
}

/**
 * The longest a forward may wait to start here: our `maxWaitMs` and the origin's budget (`waitMs`, a
 * peer-controlled number: only a finite non-negative one counts); ∞ when neither is set.
 */
function waitBound(ownMs: number, originMs: unknown): number {
  const own = ownMs > 0 ? ownMs : Number.POSITIVE_INFINITY;
  const theirs =
    typeof originMs === "number" && Number.isFinite(originMs) && originMs >= 0
      ? originMs
      : Number.POSITIVE_INFINITY;
  return Math.min(own, theirs);
}
