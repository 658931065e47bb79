/**
 * The node's timers as real ones. A pending timer is held under its key (`timerKey`): setting one that
 * is pending replaces it, cancelling one that is not does nothing (core/node/types.ts, `set-timer`).
 */
import { timerKey as coreTimerKey, type Effect } from "../../core/node/types.js";

/** A timer as the node names it in `set-timer` / `cancel-timer` and wants it back in `timer`. */
export type NodeTimer = Extract<Effect, { type: "set-timer" }>["timer"];

/** The key a pending timer is held under: the one place that knows how a timer is named. */
export function timerKey(timer: NodeTimer): string {
  return coreTimerKey(timer);
}

/** The anti-entropy tick (the one timer the runtime tells apart: not fed back once it stops). */
export function isPollTimer(timer: NodeTimer): boolean {
  return timer.kind === "poll";
}

export class TimerTable {
  private readonly pending = new Map<string, NodeJS.Timeout>();

  /** Arms `timer` (replacing a pending one of the same key); `fire(timer)` when it expires. */
  set(timer: NodeTimer, delayMs: number, fire: (timer: NodeTimer) => void): void {
    const key = timerKey(timer);
    const old = this.pending.get(key);
    if (old) clearTimeout(old);
    const t = setTimeout(
      () => {
        this.pending.delete(key);
        fire(timer);
      },
      Math.max(0, delayMs),
    );
    t.unref?.();
    this.pending.set(key, t);
  }

  cancel(timer: NodeTimer): void {
    const key = timerKey(timer);
    const t = this.pending.get(key);
    if (t) clearTimeout(t);
    this.pending.delete(key);
  }

  /** Drops every pending timer (a restart, or shutdown). */
  clear(): void {
    for (const t of this.pending.values()) clearTimeout(t);
    this.pending.clear();
  }
}
