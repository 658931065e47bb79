/**
 * Refusals that are asked again. A candidate member refused by a check (its hello named another
 * cluster, model or no common protocol, or it lacked the cluster's credential) is remembered with a
 * backoff that doubles per refusal up to a ceiling; once it runs out the candidate may be checked
 * again — a fresh check through the same verified path, never an admission. Evidence that the
 * candidate changed (a higher mark than the one it was refused under: SWIM's incarnation) lets it be
 * checked sooner, but never more often than `afterChangeMs`. Pure: time is passed in.
 *
 * Invariants: entries ≤ max (the oldest refusal is forgotten first); `recheckAt` > `refusedAt`.
 */
import { invariant } from "./invariant.js";

/** First wait after a refusal: a fix (a restart with corrected flags, an upgrade) takes tens of seconds. */
export const RECHECK_FIRST_MS = 30_000;
/** The ceiling: a candidate that stays wrong costs each node that refused it one check per 10 min. */
export const RECHECK_MAX_MS = 600_000;
/** Evidence of change re-checks at once, but at most this often: a relay's news alone cannot flood it. */
export const RECHECK_AFTER_CHANGE_MS = 2_000;
/**
 * A refusal's reason code when the peer refused our signed timestamp (a clock is off by more than the
 * shared-secret window). Its fix is a clock, set right by the operator or by NTP without restarting
 * anything, so no restart's evidence will come: its backoff stops doubling at CLOCK_SKEW_MAX_MS.
 */
export const CLOCK_SKEW = "clock-skew";
/** The ceiling for clock-skew refusals: a fixed clock is noticed within 2 min, at one refused hello per 2 min. */
export const CLOCK_SKEW_MAX_MS = 120_000;

/** Refusals remembered at most: any peer can name as many ids as it likes. */
export const MAX_REFUSALS = 1_024;

export interface RecheckTiming {
  firstMs: number;
  maxMs: number;
  afterChangeMs: number;
}

export const DEFAULT_RECHECK: RecheckTiming = {
  firstMs: RECHECK_FIRST_MS,
  maxMs: RECHECK_MAX_MS,
  afterChangeMs: RECHECK_AFTER_CHANGE_MS,
};

export interface Refusal {
  /** Why the last check refused it (for operators). */
  reason: string;
  /** When the last check refused it. */
  refusedAt: number;
  /** When it may be checked again without evidence of change. */
  recheckAt: number;
  /** Refusals in a row (the backoff's exponent + 1). */
  refusals: number;
  /** What it was last refused under (SWIM: the incarnation heard); higher news is evidence of change. */
  mark: number;
  /**
   * The highest mark heard of it since (≥ `mark`). Evidence heard within `afterChangeMs` is kept, not
   * lost: the next mention after the floor re-checks it (a restarted member may announce its new
   * incarnation once, then only ping, which carries none).
   */
  heard: number;
}

/** A refused candidate as operators see it (`/cluster`'s `refused`). */
export interface RefusedView {
  id: string;
  reason: string;
  /** Refusals in a row (its backoff doubled each time). */
  refusals: number;
  refusedForMs: number;
  /** Until it is asked again (0: due, when next named or at once); evidence of change comes sooner. */
  recheckInMs: number;
}

/** The view of `id`'s refusal `r` at `now`. */
export function refusedView(id: string, r: Refusal, now: number): RefusedView {
  return {
    id,
    reason: r.reason,
    refusals: r.refusals,
    refusedForMs: Math.max(0, now - r.refusedAt),
    recheckInMs: Math.max(0, r.recheckAt - now),
  };
}

/** The timing for a refusal saying `reason` (`code: message`): clock skew has a lower ceiling. */
export function timingFor(t: RecheckTiming, reason: string): RecheckTiming {
  if (reason !== CLOCK_SKEW && !reason.startsWith(`${CLOCK_SKEW}:`)) return t;
  return { ...t, maxMs: Math.max(t.firstMs, Math.min(t.maxMs, CLOCK_SKEW_MAX_MS)) };
}

/** The wait after the `n`th refusal in a row (n ≥ 1): first × 2^(n−1), at most the ceiling. */
export function recheckDelayMs(t: RecheckTiming, n: number): number {
  return Math.min(t.maxMs, t.firstMs * 2 ** Math.min(Math.max(n - 1, 0), 40));
}

export class Refusals<K> {
  private readonly book = new Map<K, Refusal>();

  constructor(
    private readonly timing: RecheckTiming = DEFAULT_RECHECK,
    private readonly max = MAX_REFUSALS,
  ) {
    invariant(timing.firstMs > 0 && timing.maxMs >= timing.firstMs, "recheck backoff must grow from > 0");
  }

  /** The check of `key` refused it at `now`: its backoff grows (a first refusal waits `firstMs`). */
  refuse(key: K, reason: string, now: number, mark = 0): Refusal {
    if (this.max <= 0)
      return { reason, refusedAt: now, recheckAt: now + this.timing.firstMs, refusals: 1, mark, heard: mark };
    const prev = this.book.get(key);
    this.book.delete(key); // re-inserted last: the oldest refusal is the one forgotten
    if (prev === undefined && this.book.size >= this.max)
      this.book.delete(this.book.keys().next().value as K);
    const refusals = (prev?.refusals ?? 0) + 1;
    const r: Refusal = {
      reason,
      refusedAt: now,
      recheckAt: now + recheckDelayMs(timingFor(this.timing, reason), refusals),
      refusals,
      // The evidence that led to this check is spent: only news beyond it is evidence again.
      mark: Math.max(mark, prev?.heard ?? mark),
      heard: 0,
    };
    r.heard = r.mark;
    this.book.set(key, r);
    invariant(this.book.size <= this.max, "refusals exceed their bound");
    return r;
  }

  /**
   * A re-check of `key` got no answer (the candidate restarting, say): it stays refused, its backoff
   * unchanged, and is asked again at `at`, which its view then shows rather than "due".
   */
  postpone(key: K, at: number): void {
    const r = this.book.get(key);
    if (r !== undefined && at > r.recheckAt) r.recheckAt = at;
  }

  /** It passed a check: forgotten (a later refusal starts the backoff over). */
  forget(key: K): void {
    this.book.delete(key);
  }

  get(key: K): Refusal | undefined {
    return this.book.get(key);
  }

  has(key: K): boolean {
    return this.book.has(key);
  }

  /**
   * News of `key` at `now` (under `mark`, if it carries one, which is remembered): whether it may be
   * checked — never refused, its wait over, or a mark higher than the one it was refused under heard
   * (now or since) and `afterChangeMs` passed since that refusal.
   */
  mayCheck(key: K, now: number, mark?: number): boolean {
    const r = this.book.get(key);
    if (r === undefined) return true;
    // Remembered even when due: a mention that starts no check (a full queue) must not lose it.
    if (mark !== undefined && mark > r.heard) r.heard = mark;
    if (now >= r.recheckAt) return true;
    return r.heard > r.mark && now - r.refusedAt >= this.timing.afterChangeMs;
  }

  /** The earliest `recheckAt` of all (undefined when none is refused). */
  nextRecheckAt(): number | undefined {
    let at: number | undefined;
    for (const r of this.book.values()) if (at === undefined || r.recheckAt < at) at = r.recheckAt;
    return at;
  }

  get size(): number {
    return this.book.size;
  }

  entries(): [K, Refusal][] {
    return [...this.book].map(([k, r]) => [k, { ...r }]);
  }
}
