/**
 * The node's timers as real ones. A pending timer is held under its key (`timerKey`): setting one that
 * is pending replaces it, cancelling one that is not does nothing (core/node/types.ts, `set-timer`).
 *
 * Staged snapshot work (the `estimates` timer, always set at delay 0) runs in slices: the core's
 * bounded steps back to back for at most `sliceMs`, then a yield through `setImmediate`, so the I/O
 * that waited (a `/health`, a forward, a snapshot's body) goes first. A `setTimeout(0)` per step would
 * cost a 1 ms floor per step and still let one step follow another without reading a socket.
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

/** How long staged snapshot steps may run back to back before the event loop is yielded. */
export const STEP_SLICE_MS = 2;

export interface TimerTableOptions {
  /** Staged-step slice (default STEP_SLICE_MS). */
  sliceMs?: number;
  /** Monotonic clock in ms (default performance.now). */
  now?: () => number;
}

export class TimerTable {
  private readonly pending = new Map<string, NodeJS.Timeout>();
  private readonly immediates = new Map<string, NodeJS.Immediate>();
  /** The step timer whose slice is running: a re-arm inside it continues the slice. */
  private slicing: { key: string; again: boolean } | undefined;
  private readonly sliceMs: number;
  private readonly now: () => number;

  constructor(opts: TimerTableOptions = {}) {
    this.sliceMs = opts.sliceMs ?? STEP_SLICE_MS;
    this.now = opts.now ?? (() => performance.now());
  }

  /** Arms `timer` (replacing a pending one of the same key); `fire(timer)` when it expires. */
  set(timer: NodeTimer, delayMs: number, fire: (timer: NodeTimer) => void): void {
    const key = timerKey(timer);
    this.drop(key);
    if (timer.kind === "estimates" && delayMs <= 0) {
      if (this.slicing?.key === key) {
        this.slicing.again = true;
        return;
      }
      const im = setImmediate(() => {
        this.immediates.delete(key);
        this.runSlice(key, timer, fire);
      });
      im.unref?.();
      this.immediates.set(key, im);
      return;
    }
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
    this.drop(timerKey(timer));
  }

  /** Drops every pending timer (a restart, or shutdown). */
  clear(): void {
    for (const t of this.pending.values()) clearTimeout(t);
    for (const im of this.immediates.values()) clearImmediate(im);
    this.pending.clear();
    this.immediates.clear();
    if (this.slicing) this.slicing.again = false;
  }

  private drop(key: string): void {
    const t = this.pending.get(key);
    if (t) clearTimeout(t);
    this.pending.delete(key);
    const im = this.immediates.get(key);
    if (im) clearImmediate(im);
    this.immediates.delete(key);
    if (this.slicing?.key === key) this.slicing.again = false;
  }

  /** Fires the step timer while the node re-arms it, up to `sliceMs`; then yields and goes on. */
  private runSlice(key: string, timer: NodeTimer, fire: (timer: NodeTimer) => void): void {
    const start = this.now();
    const s = { key, again: true };
    this.slicing = s;
    try {
      while (s.again) {
        s.again = false;
        fire(timer);
        if (this.now() - start >= this.sliceMs) break;
      }
    } finally {
      this.slicing = undefined;
    }
    if (s.again) this.set(timer, 0, fire);
  }
}
