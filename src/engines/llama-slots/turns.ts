/**
 * The order in which the slot cache's runs go: at most one run per slot, the others waiting first
 * come first served (TurnQueue); and one launch at a time, from choosing a slot until the server's
 * response's first event (LaunchLock), so the server applies starts in the order the mirror does.
 */
import { EngineAbortedError } from "../errors.js";

export class TurnQueue {
  private readonly waiting: (() => void)[] = [];
  /** Runs holding a turn (at most one per slot): handed straight to the next waiter on release. */
  private turns = 0;

  constructor(private readonly slots: number) {}

  /** Waits for a free slot (first come, first served). */
  acquire(signal?: AbortSignal): Promise<void> {
    if (this.turns < this.slots && this.waiting.length === 0) {
      this.turns++;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const go = () => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      };
      const onAbort = () => {
        const i = this.waiting.indexOf(go);
        if (i >= 0) this.waiting.splice(i, 1);
        reject(new EngineAbortedError());
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.waiting.push(go);
    });
  }

  /** Hands the turn to the next waiter, or frees it. */
  release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.turns--;
  }
}

export class LaunchLock {
  private launching: Promise<void> = Promise.resolve();

  /**
   * Resolves, once every earlier holder released it, to this holder's release. A holder waits through
   * another start's whole prefill: an abort meanwhile rejects at once, and its place passes on.
   */
  async lock(signal?: AbortSignal): Promise<() => void> {
    const prev = this.launching;
    let release!: () => void;
    this.launching = new Promise<void>((r) => {
      release = r;
    });
    let onAbort: (() => void) | undefined;
    const aborted = new Promise<true>((r) => {
      onAbort = () => r(true);
      if (signal?.aborted) r(true);
      else signal?.addEventListener("abort", onAbort, { once: true });
    });
    try {
      if (await Promise.race([prev.then(() => false), aborted])) {
        void prev.then(release);
        throw new EngineAbortedError();
      }
      return release;
    } finally {
      if (onAbort) signal?.removeEventListener("abort", onAbort);
    }
  }
}
