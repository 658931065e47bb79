/**
 * Hedged local runs (part of answer recovery: config `answerRecovery`). A request whose peer acked
 * it and then went silent or overdue (its answer and the probes for it lost) moves on, and is queued
 * here once its timed-out waits reach `maxTimedOutAttempts` or its plan is spent — to run uncached
 * (ahead of later arrivals when it lost waits to timeouts). Yet a peer that started or finished the
 * job holds it, or the answer it keeps for a probe (serving.ts), usually the cheaper of the two: so
 * while the local run waits or goes on, the latest such peer is asked again, the same forward (its
 * attempt's number) once per ack timeout, a few times. The fallback sends that attempt no `cancel`
 * (a job still queued at a stalled peer is what the hedge waits for); the hedge's end does, unless
 * the peer answered it, refused it or is gone: the request answered otherwise (our run, another
 * peer), failed or refused, or a later attempt's peer hedged in its place. A peer that dropped the
 * job says so: asking ends at that error. It ends too when the peer is known
 * to have restarted, left or gone down (its duplicate window is gone: it would run the job again; a
 * restart shows as a newer epoch, in the full mesh's snapshots or, under scuttlebutt, in any member's
 * digest or state: SWIM never reports a peer back within its suspicion time), and when it is
 * quarantined (then only its cancel goes).
 * Whichever answer comes first is the reply; a local run whose request the peer answered is aborted
 * when the engine can (abort-runs.ts), else completes unreplied (its tree insert stands). A streaming request
 * (`EngineRequest.stream`) is the exception: once its local run starts, its client may hold that run's text,
 * which the peer's need not continue (another engine, batch nondeterminism), so the run answers: the hedge
 * ends as it starts, with a final cancel (the peer aborts: abort-runs.ts), and a peer answer after that is
 * refused; before, the peer's answer goes out whole. (Aborting the local run instead would be unsafe for the
 * same reason: its text may already be the client's.) The request leaves the pending table with its one
 * reply, so it is never answered twice. Owned by the origin.
 */
import { invariant } from "../invariant.js";
import type { Effect, NodeId, Timer } from "./types.js";

/** Re-asks of the peer per hedged run: each costs a re-sent forward, each may be lost too. */
export const HEDGE_ASKS = 8;

/** The peer a request may still get its answer from while it runs here. */
export interface Hedge {
  to: NodeId;
  /** The attempt that peer acked (the request's latest acked and abandoned one). */
  attempt: number;
  /** Re-asks sent so far (at most HEDGE_ASKS). */
  asks: number;
  /**
   * The newest epoch that peer's acks of the attempt said (forward-attempts.ts `lostTo`): a re-ask acked by
   * a new incarnation is that incarnation's job, and a restart up to it does not end the hedge.
   */
  epoch?: number | undefined;
  /** Its timer is armed: a re-ask is due, or the wait for the last one's answer is not over. */
  armed?: boolean;
}

/** What of a pending request (pending-requests.ts) a hedge reads. */
export interface Hedged {
  reqId: string;
  attempt: number;
  current: NodeId | undefined;
  hedge?: Hedge | undefined;
}

/** The hedge of a request running here, if a peer acked one of its attempts and went silent. */
export function hedgeOf(p: Hedged): Hedge | undefined {
  return p.current === undefined ? p.hedge : undefined;
}

/** Whether `h` is the hedge on `to`'s attempt `attempt`. */
export function hedgeOn(h: Hedge | undefined, to: NodeId | undefined, attempt: number): boolean {
  return h !== undefined && h.to === to && h.attempt === attempt;
}

/** The cancel of the job the hedge's peer may still hold (the fallback left it: sent at the hedge's end). */
export function hedgeCancel(h: Hedge, reqId: string): Effect {
  return { type: "send", to: h.to, msg: { type: "cancel", reqId, attempt: h.attempt } };
}

/** One more re-ask of the hedge's peer, if any is left (counted now). */
export function askAgain(h: Hedge): boolean {
  if (h.asks >= HEDGE_ASKS) return false;
  h.asks++;
  return true;
}

/**
 * Local runs whose request its hedge's peer answered first (or whose client hung up: client-gone.ts):
 * they complete unreplied. An entry lives from then to the run's end (engine-done or -failed), or to
 * a restart.
 */
export class AnsweredRuns {
  private readonly runs = new Set<string>();

  clear(): void {
    this.runs.clear();
  }

  /** The peer answered `p`, which runs here: its run will complete unreplied. */
  add(p: Hedged): void {
    const key = runKey(p.reqId, p.attempt);
    invariant(!this.runs.has(key), () => `${p.reqId} was answered by its hedge twice`);
    this.runs.add(key);
  }

  /** Whether this local run's request was answered already (consumed: asked once, at its end). */
  take(reqId: string, attempt: number): boolean {
    return this.runs.delete(runKey(reqId, attempt));
  }
}

export function hedgeTimer(h: Hedge, reqId: string): Timer {
  return { kind: "hedge", reqId, attempt: h.attempt };
}

function runKey(reqId: string, attempt: number): string {
  return `${reqId}#${attempt}`;
}
