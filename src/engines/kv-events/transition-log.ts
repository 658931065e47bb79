/**
 * One log line when the KV-event mirror becomes degraded (with why), forgets blocks (why, how many),
 * is cleared for a new publisher (the engine restarted) or becomes exact again: why routing to this node lost
 * (or got back) its cache, from the logs alone. Transitions, never batches; and bounded: a stream that flaps
 * (a publisher restarting in a loop, gap after gap) logs at most `maxLines` lines per `windowMs`. Past that,
 * lines are counted, and one line at the window's end says how many were left out and where the mirror stands
 * then, so the last line logged is never a state the mirror has left.
 */
import type { MirrorTransition } from "./mirror.js";

export type KvEventsLog = (msg: string, fields: Record<string, unknown>) => void;

export interface TransitionLogOptions {
  maxLines?: number;
  windowMs?: number;
  now?: () => number;
}

/** Where the mirror stands, for the summary line. */
export interface MirrorStanding {
  exact: boolean;
  degraded: string | undefined;
  /** New publishers seen (the subscriber's `restarts`): each is an engine whose cache started empty. */
  restarts?: number;
}

export class KvTransitionLog {
  private readonly maxLines: number;
  private readonly windowMs: number;
  private readonly now: () => number;
  private windowStart = Number.NEGATIVE_INFINITY;
  private lines = 0;
  private suppressed = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** A degraded line was due since the last exact one: the next exact standing is worth a line. */
  private wasDegraded = false;
  private restartsSeen = 0;

  constructor(
    private readonly log: KvEventsLog,
    private readonly standing: () => MirrorStanding,
    opts: TransitionLogOptions = {},
  ) {
    this.maxLines = opts.maxLines ?? 5;
    this.windowMs = opts.windowMs ?? 60_000;
    this.now = opts.now ?? Date.now;
  }

  /** The mirror's own transitions (KvCacheMirror.onTransition). */
  transition(t: MirrorTransition): void {
    if (t.kind === "degraded" || t.degraded) {
      this.wasDegraded = true;
      this.line("KV-event mirror degraded: routing here uses the blocks it knows plus an LRU guess", {
        reason: t.reason,
        ...(t.kind === "forgot" ? { forgottenBlocks: t.blocks } : {}),
      });
    } else if (t.blocks > 0) {
      this.line("KV-event mirror forgot the blocks it held", { reason: t.reason, blocks: t.blocks });
    }
  }

  /** After any change: a mirror degraded before and exact now is worth a line. */
  changed(): void {
    const s = this.standing();
    const restarts = s.restarts ?? 0;
    if (restarts > this.restartsSeen) {
      // The mirror is cleared and its history read anew: not exact until then, so its exact line is due.
      this.restartsSeen = restarts;
      this.wasDegraded = true;
      this.line("KV-event publisher restarted: the engine's cache starts empty; reading its history", {
        restarts,
      });
      return;
    }
    if (!this.wasDegraded || !s.exact) return;
    this.wasDegraded = false;
    this.line("KV-event mirror exact again", {});
  }

  close(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private line(msg: string, fields: Record<string, unknown>): void {
    const now = this.now();
    if (now - this.windowStart >= this.windowMs) {
      this.windowStart = now;
      this.lines = 0;
    }
    if (this.lines < this.maxLines) {
      this.lines++;
      this.log(msg, fields);
      return;
    }
    this.suppressed++;
    if (this.timer) return;
    this.timer = setTimeout(() => this.summary(), Math.max(0, this.windowStart + this.windowMs - now));
    this.timer.unref?.();
  }

  private summary(): void {
    this.timer = undefined;
    const s = this.standing();
    // A new window: the summary is its first line.
    this.windowStart = this.now();
    this.lines = 1;
    const suppressed = this.suppressed;
    this.suppressed = 0;
    // The standing now is said: an exact line is no longer due.
    if (s.exact) this.wasDegraded = false;
    this.log("KV-event mirror changed more often than logged", {
      suppressed,
      exact: s.exact,
      ...(s.degraded !== undefined ? { degraded: s.degraded } : {}),
    });
  }
}
