/**
 * The `reply` effects the origin answers its clients with, and their per-request record (the paper's
 * §5 measurements). Pure: the request's facts in, the effect out.
 */
import type { EngineRequest, EngineResult } from "../engine.js";
import type { Effect, NodeId, ReplyErrorCode, ReplyOutcome, RequestRecord, ServedTiming } from "./types.js";

/** What the origin knows of a request when it answers it. */
export interface RequestFacts {
  reqId: string;
  request: EngineRequest;
  receivedAt: number;
  /** The policy's first choice, its estimated match, and the attempts that failed. */
  target: NodeId;
  predicted: number;
  fallbacks: number;
}

/** Who answers: this node, under its current policy. */
export interface Answerer {
  id: NodeId;
  policy: string;
}

/** A failure; without `p` the request never got that far (refused at admission). */
export function failReply(
  by: Answerer,
  reqId: string,
  request: EngineRequest,
  now: number,
  error: string,
  code: ReplyErrorCode,
  p?: RequestFacts,
  retryAfterMs?: number,
): Effect {
  const record: RequestRecord = {
    reqId,
    origin: by.id,
    target: p?.target ?? by.id,
    servedBy: undefined,
    hops: 0,
    fallbacks: p?.fallbacks ?? 0,
    policy: by.policy,
    promptTokens: request.tokens.length,
    predictedHitTokens: p?.predicted ?? 0,
    actualHitTokens: 0,
    queueMs: 0,
    prefillMs: 0,
    decodeMs: 0,
    networkMs: 0,
    totalMs: now - (p?.receivedAt ?? now),
    receivedAt: p?.receivedAt ?? now,
    finishedAt: now,
  };
  const outcome: ReplyOutcome = { ok: false, error, code };
  if (retryAfterMs !== undefined) outcome.retryAfterMs = Math.ceil(retryAfterMs);
  return { type: "reply", reqId, outcome, record };
}

/** The least wait a refusal by load tells its client (`retryAfterSec`: 1 s). */
export const MIN_RETRY_AFTER_MS = 1_000;

/**
 * What is left of a wait of `waitMs` once `elapsedMs` have passed (or past a bound of that many ms),
 * at least `MIN_RETRY_AFTER_MS`.
 */
export function retryAfterLeftMs(waitMs: number, elapsedMs: number): number {
  return Math.max(MIN_RETRY_AFTER_MS, waitMs - elapsedMs);
}

/**
 * The wait a refused client is told before it tries again (HTTP `Retry-After`, whole seconds): for a
 * refusal by load (`overloaded`, `deadline`: a 429; `unavailable`: a 503) the node's drain estimate or
 * its engine's wait rounded up, at least 1 s, else 1 s; undefined for any other error. The daemon's
 * API and the simulator's client share it.
 */
export function retryAfterSec(outcome: Extract<ReplyOutcome, { ok: false }>): number | undefined {
  const { code } = outcome;
  if (code !== "overloaded" && code !== "deadline" && code !== "unavailable") return undefined;
  return Math.max(1, Math.ceil((outcome.retryAfterMs ?? 1_000) / 1_000));
}

/** A result, served `hops` away (0: here) by `timing.servedBy`. */
export function okReply(
  by: Answerer,
  p: RequestFacts,
  result: EngineResult,
  timing: ServedTiming,
  hops: number,
  now: number,
): Effect {
  const totalMs = now - p.receivedAt;
  const record: RequestRecord = {
    reqId: p.reqId,
    origin: by.id,
    target: p.target,
    servedBy: timing.servedBy,
    hops,
    fallbacks: p.fallbacks,
    policy: by.policy,
    promptTokens: p.request.tokens.length,
    predictedHitTokens: p.predicted,
    actualHitTokens: result.cachedTokens,
    queueMs: timing.queueMs,
    prefillMs: timing.prefillMs,
    decodeMs: timing.decodeMs,
    networkMs: Math.max(0, totalMs - timing.queueMs - timing.prefillMs - timing.decodeMs),
    totalMs,
    receivedAt: p.receivedAt,
    finishedAt: now,
  };
  return { type: "reply", reqId: p.reqId, outcome: { ok: true, result }, record };
}
