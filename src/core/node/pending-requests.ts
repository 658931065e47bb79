/**
 * The origin's pending requests: one record per request a client sent here and not yet answered, its
 * plan and its current attempt. Kept apart from origin.ts so the exactly-once rule (a request leaves
 * the table as its reply is made, and only then) and the attempt checks live in one small place.
 */
import type { EngineRequest } from "../engine.js";
import { invariant } from "../invariant.js";
import { deadlineAt } from "./deadline.js";
import type { AttemptClock } from "./forward-acks.js";
import type { Hedge } from "./hedge.js";
import type { Plan } from "./planner.js";
import type { NodeId, Timer } from "./types.js";

/** A request this node originated (a client sent it here) and has not answered yet. */
export interface Pending extends AttemptClock, Plan {
  /** The next entry of `plan` to try. */
  next: number;
  /** The peer of the current forward attempt; undefined once the request runs (or queues) here. */
  current: NodeId | undefined;
  fallbacks: number;
  /** Attempts abandoned while their peer may still answer (a late answer then still counts). */
  abandoned?: Abandoned[];
  /** Its last attempt's peer acked and went silent: asked again while it runs here (hedge.ts). */
  hedge?: Hedge;
  /**
   * Peers whose engine said this request's prompt was bad (`fault: "input"`): backed off only if it
   * is then served elsewhere (answering.ts `provenWrong`), never for a prompt every engine refuses.
   */
  refusedBy?: NodeId[];
  /**
   * Its run here failed (our engine's load, or the engine itself) while its hedge's peer may still
   * answer: the request waits on that peer, and fails with this (a 503 and its wait counted from `at`,
   * or a 502) only if that leg ends unanswered.
   */
  failedHere?: {
    error: string;
    code: "unavailable" | "engine";
    retryAfterMs?: number | undefined;
    at: number;
  };
  /** The wait bound admission last applied (`waitsTooLong`), and whether the client's deadline set it. */
  waitBound?: { ms: number; deadline: boolean; runMs: number; tripped: boolean };
}

/** Abandoned attempts a request keeps (its plan holds each member once; offload may add more). */
export const MAX_ABANDONED = 16;

/**
 * An attempt the request moved on from with a cancel that was not final, or when its peer said
 * goodbye: its peer may still run it, so the request's settling owes that peer a final cancel
 * (abort-runs.ts `owedCancels`).
 */
export interface Abandoned {
  to: NodeId;
  attempt: number;
  /** The epoch its peer acked it in, if an ack said one: a restart past it took the job along. */
  epoch?: number | undefined;
  /** Owed no final cancel: its peer answered it, was sent one already, or restarted since it took it. */
  done?: boolean;
  /**
   * Its peer said goodbye: it drains what it took (runs it, then exits), so its final cancel goes
   * though the peer is no member any more (abort-runs.ts `owedCancels`).
   */
  left?: true;
}

/** A pending request to run here (its forward attempts are over). */
export interface LocalRun {
  reqId: string;
  attempt: number;
  request: EngineRequest;
  /**
   * It lost forward attempts to timeouts (config `maxTimedOutAttempts`): it runs ahead of every job
   * that reached us after it did (`since`, its admission here).
   */
  priority?: boolean;
  /** Never offloaded (it lost forward attempts to timeouts), though in line: see `Origin.runHere`. */
  stays?: boolean;
  since?: number;
}

export class PendingRequests {
  private readonly table = new Map<string, Pending>();
  /** Requests settled since the last `takeSettled` (the node's current step): what they owe peers. */
  private settled: Pending[] = [];

  clear(): void {
    this.table.clear();
    this.settled = [];
  }

  has(reqId: string): boolean {
    return this.table.has(reqId);
  }

  /** The pending request `reqId`, if it is pending. */
  find(reqId: string): Pending | undefined {
    return this.table.get(reqId);
  }

  /** The pending request `reqId`, which must be pending. */
  get(reqId: string): Pending {
    const p = this.table.get(reqId);
    invariant(p !== undefined, () => `request ${reqId} is not pending`);
    return p;
  }

  values(): IterableIterator<Pending> {
    return this.table.values();
  }

  /** A routed request: no attempt made yet, its plan unwalked. */
  open(reqId: string, request: EngineRequest, plan: Plan, now: number, forwardTimeoutMs: number): void {
    this.table.set(reqId, {
      ...plan,
      reqId,
      request,
      receivedAt: now,
      next: 0,
      attempt: 0,
      current: undefined,
      attemptSentAt: now,
      fallbacks: 0,
      ackedAt: -1,
      ackArmed: false,
      probes: 0,
      timeouts: 0,
      answerBy: Number.POSITIVE_INFINITY,
      answerWindowMs: 0,
      outputSinceSend: false,
      deadlineAt: deadlineAt(request, now),
      forwardTimeoutMs,
    });
  }

  /** Exactly once: the request leaves the table as its reply is made, and only then. */
  settle(reqId: string): Pending {
    const p = this.get(reqId);
    this.table.delete(reqId);
    if (p.abandoned !== undefined) this.settled.push(p);
    return p;
  }

  /** The requests settled since the last call that abandoned attempts on their way (each once). */
  takeSettled(): Pending[] {
    const s = this.settled;
    if (s.length > 0) this.settled = [];
    return s;
  }

  /** A local run ends the request it ran for: that request waits on it, at that attempt. */
  settleLocal(run: LocalRun): Pending {
    const p = this.table.get(run.reqId);
    invariant(
      p !== undefined && p.current === undefined && p.attempt === run.attempt && p.request === run.request,
      () => `a local run of ${run.reqId} ended, but the request does not wait on it`,
    );
    return this.settle(run.reqId);
  }
}

/** The timer bounding the request's current forward attempt. */
export function forwardTimer(p: Pending): Timer {
  return { kind: "forward", reqId: p.reqId, attempt: p.attempt };
}

/**
 * Whether `to`'s attempt `attempt` is the request's current forward attempt: only its answers and acks
 * move the request on (any other attempt's are late). Pure: the late-answer bookkeeping is the caller's.
 */
export function isCurrentAttempt(
  p: Pick<Pending, "current" | "attempt">,
  to: NodeId,
  attempt: number,
): boolean {
  return p.current === to && p.attempt === attempt;
}
