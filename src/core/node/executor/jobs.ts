/**
 * The executor's vocabulary: what a job is asked to run (`JobSpec`), the job as the queue and the
 * cache track it, what a finished one returns (`Completion`) and the executor's counters.
 */
import type { EngineRequest, EngineResult } from "../../engine.js";
import type { LockHandle } from "../../radix-tree.js";
import type { AbortReason } from "../abort-runs.js";
import type { NodeId, ServedTiming } from "../types.js";

/** What to run: a request of our own client, or a forward a peer sent us. */
export interface JobSpec {
  /** `check`: a spot check (spot-check.ts) — run, never kept in the cache. */
  kind: "client" | "forward" | "check";
  /** The origin's request id. */
  reqId: string;
  from: NodeId | undefined;
  attempt: number;
  request: EngineRequest;
  /** Forwards: the key a cancel or a duplicate finds the job by while it waits or runs. */
  key?: string;
  /**
   * Forwards: ms its origin still waited for it when it arrived (the forward's `deadlineMs`). A job
   * whose deadline passes while it waits is dropped when its turn comes: its origin has moved on.
   */
  deadlineMs?: number | undefined;
  /**
   * Client requests: it lost forward attempts to timeouts already (config `maxTimedOutAttempts`), so
   * it runs ahead of every waiting job that reached us after it (`since`), and is never offloaded.
   */
  priority?: boolean;
  /** Client requests: never offloaded, though it waits in line (`priority` under a wait bound). */
  stays?: boolean;
  /**
   * When the job joined this node's queue (default: now; a priority job: its request's arrival here):
   * a priority job goes ahead of the waiting jobs whose `since` is later.
   */
  since?: number;
}

export interface Job extends JobSpec {
  jobId: string;
  enqueuedAt: number;
  startedAt: number;
  handle: LockHandle | undefined;
  matched: number;
  cacheTokens: number;
  /** Cancelled by its origin while queued: skipped when its turn comes. */
  cancelled: boolean;
  /** Running, and its abort asked (abort-runs.ts): why nobody takes its answer. */
  aborting?: AbortReason;
  /** Absolute time past which nobody waits for it (∞: no deadline). */
  expiresAt: number;
  /** With queue-aware waits (`workWaits`): its expected run (ms), priced when queued, again if a job it counted on leaves. */
  workMs: number;
  /** The cached prefix (key tokens) that price counted on (queue-prices.ts). */
  pricedMatch: number;
  since: number;
}

/** A job the engine finished: its spec, the result (engine-private fields removed) and its timing. */
export interface Completion {
  job: Readonly<JobSpec>;
  result: EngineResult;
  timing: ServedTiming;
}

export interface ExecutorCounters {
  /** Queued forwards dropped at their turn because their origin's deadline had passed. */
  expiredForwards: number;
  servedLocal: number;
  servedForPeers: number;
  engineFailures: number;
  evictedTokens: number;
  abortedClientGone: number;
  abortedHedged: number;
  abortedCancelled: number;
}

/** Every counter at zero (a new executor, or one after a crash-restart). */
export function zeroCounters(): ExecutorCounters {
  return {
    expiredForwards: 0,
    servedLocal: 0,
    servedForPeers: 0,
    engineFailures: 0,
    evictedTokens: 0,
    abortedClientGone: 0,
    abortedHedged: 0,
    abortedCancelled: 0,
  };
}

/** A job for `spec`, queued `now` under the id `jobId`, not priced yet. */
export function newJob(spec: JobSpec, jobId: string, now: number): Job {
  return {
    ...spec,
    jobId,
    enqueuedAt: now,
    startedAt: now,
    handle: undefined,
    matched: 0,
    cacheTokens: 0,
    cancelled: false,
    expiresAt: expiry(spec.deadlineMs, now),
    workMs: 0,
    pricedMatch: 0,
    since: spec.since ?? now,
  };
}

/** When a job of a forward with `deadlineMs` (peer-controlled: only a finite, non-negative one) expires. */
export function expiry(deadlineMs: number | undefined, now: number): number {
  return typeof deadlineMs === "number" && Number.isFinite(deadlineMs) && deadlineMs >= 0
    ? now + deadlineMs
    : Number.POSITIVE_INFINITY;
}

/** Cached sequences are the engine's private business: never ship them to peers or clients. */
export function stripCache(r: EngineResult): EngineResult {
  if (r.cachedSequences === undefined) return r;
  const { cachedSequences: _drop, ...rest } = r;
  return rest;
}
