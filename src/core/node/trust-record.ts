/**
 * The record peer trust keeps of one peer (trust.ts owns and moves it): its shape, a fresh one, and
 * what /cluster and the metrics read of it. Apart from trust.ts so the breaker's rules are read alone.
 */
import type { BreakerState, TrustView } from "./types.js";

export interface PeerTrust {
  score: number;
  state: BreakerState;
  /** Times of the recent failures (at most `failures` kept). */
  recent: number[];
  /** Failures since its last answer, however far apart. */
  streak: number;
  openUntil: number;
  openMs: number;
  /** The half-open probe's attempt while it is out. */
  probe: string | undefined;
  /** Results it gave our forwards (current or late): its progress, as we see it. */
  answers: number;
  /** Our open attempts to it → `answers` when each was sent, and whether it failed (it ends next). */
  open: Map<string, { stamp: number; failed: boolean }>;
  /** Open attempts sent since its last answer (stamped with the current `answers`), not failed. */
  unanswered: number;
  /** Attempts sent since its last answer that failed (since its breaker last opened). */
  failedSince: number;
  /** It answered a forward of ours since we started tracking it or its breaker last opened. */
  proven: boolean;
  busyUntil: number;
  busyMs: number;
  failures: number;
  /** Of `failures`, those for answering late (`Trust.late`). */
  late: number;
  refusals: number;
  opened: number;
}

/** A peer we know nothing of yet: trusted, its breaker closed at its first open period. */
export function freshTrust(openMs: number): PeerTrust {
  return {
    score: 1,
    state: "closed",
    recent: [],
    streak: 0,
    openUntil: 0,
    openMs,
    probe: undefined,
    answers: 0,
    open: new Map(),
    unanswered: 0,
    failedSince: 0,
    proven: false,
    busyUntil: 0,
    busyMs: 0,
    failures: 0,
    late: 0,
    refusals: 0,
    opened: 0,
  };
}

export function viewOf(t: PeerTrust): TrustView {
  const { score, state, failures, late, refusals, opened } = t;
  return { score, state, failures, late, refusals, opened };
}
