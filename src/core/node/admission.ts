/**
 * Admission: whether the origin takes a client request, and the refusal when it does not — a
 * duplicate id or a bad request at once; by expected wait (`maxWaitMs`) or the client's deadline
 * (deadline.ts) once it would run here, with the retry hint its refusal carries.
 *
 * Part of the origin role: origin.ts owns the pending requests and the counters this reads and
 * moves, and decides what follows (a spill to a peer, our queue, the refusal).
 */
import type { EngineRequest } from "../engine.js";
import { requestProblem } from "../namespace.js";
import type { GoneClients } from "./client-gone.js";
import type { NodeConfig } from "./config.js";
import type { LocalRun, PendingRequests } from "./pending-requests.js";
import { type Answerer, failReply, retryAfterLeftMs } from "./replies.js";
import type { Effect } from "./types.js";

/** The origin's counters admission moves. */
export interface AdmissionCounters {
  clientRequests: number;
  rejectedOverload: number;
  clientDeadlineRefusals: number;
}

export class Admission {
  constructor(
    private readonly config: NodeConfig,
    private readonly pending: PendingRequests,
    private readonly gone: GoneClients,
    private readonly counters: AdmissionCounters,
    /** Who signs the replies (origin.ts `by`): the policy may change at run time. */
    private readonly by: () => Answerer,
  ) {}

  /** A client request arrived: counted; the refusal to reply at once, if it is not acceptable. */
  admit(reqId: string, request: EngineRequest, now: number): Effect | undefined {
    this.counters.clientRequests++;
    this.gone.reopened(reqId);
    // The runtime must use unique ids; answering would be ambiguous, so refuse this one only.
    if (this.pending.has(reqId))
      return failReply(this.by(), reqId, request, now, "duplicate request id", "invalid");
    const why = requestProblem(request, this.config.maxPromptTokens);
    if (why !== undefined) return failReply(this.by(), reqId, request, now, why, "invalid");
    return undefined;
  }

  /**
   * Admission by expected wait (`maxWaitMs`): whether a local run expected to start in `waitMs`
   * waits too long, and may instead go to a peer expected to start it in time (only a request
   * never forwarded yet: one whose peers failed it does not try them again).
   */
  waitsTooLong(
    reqId: string,
    waitMs: number | undefined,
    now: number,
    runMs: number,
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

  /**
   * The refusal of a request the local queue cannot take (full, or past its wait bound): it settles
   * (answered now, no longer pending), with a retry hint when a measured wait says when to retry.
   */
  overloaded(run: LocalRun, now: number, waitMs?: number): Effect {
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
      const retryAfterMs = retryAfterLeftMs(waitMs ?? 0, Math.max(0, bound.ms));
      return failReply(this.by(), run.reqId, run.request, now, why, "deadline", p, retryAfterMs);
    }
    if (waitMs === undefined)
      return failReply(this.by(), run.reqId, run.request, now, "overloaded: queue full", "overloaded", p);
    const why = `overloaded: expected wait ${Math.ceil(waitMs)} ms exceeds ${this.config.maxWaitMs} ms`;
    // Retry once the queue has drained back under the bound, at the measured pace.
    const retryAfterMs = retryAfterLeftMs(waitMs, this.config.maxWaitMs);
    return failReply(this.by(), run.reqId, run.request, now, why, "overloaded", p, retryAfterMs);
  }
}
