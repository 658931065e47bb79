/**
 * The live batches the subscriber received and its worker has not applied yet, bounded in count and
 * bytes: on overflow the oldest are dropped (the worker recovers them by replay like any gap).
 */

/** A live batch as the SUB socket delivered it. */
export interface Live {
  seq: number;
  payload: Uint8Array;
  /** Numbered below the previous live batch: a new publisher. */
  restart: boolean;
  /** The first received after the connection dropped: its publisher may be new (check first). */
  afterDrop?: boolean;
}

export class LiveQueue {
  private items: Live[] = [];
  private bytes = 0;
  private waiter: (() => void) | undefined;

  constructor(
    private readonly maxBatches: number,
    private readonly maxBytes: number,
  ) {}

  get length(): number {
    return this.items.length;
  }

  /** The batch the worker takes next, left in place. */
  first(): Live | undefined {
    return this.items[0];
  }

  /** Adds `item` at the back; returns how many older batches the bounds dropped for it. */
  push(item: Live): number {
    this.items.push(item);
    this.bytes += item.payload.byteLength;
    let dropped = 0;
    while (this.items.length > 1 && (this.items.length > this.maxBatches || this.bytes > this.maxBytes)) {
      // Keep a restart marker: dropping it would hide the new publisher.
      const i = Math.max(
        this.items.findIndex((l) => !l.restart),
        0,
      );
      const [gone] = this.items.splice(i, 1);
      this.bytes -= gone!.payload.byteLength;
      // The check it carried is owed to whatever came after the drop: pass it on.
      if (gone!.afterDrop) this.items[Math.min(i, this.items.length - 1)]!.afterDrop = true;
      dropped++;
    }
    this.wake();
    return dropped;
  }

  /** Resolves true when a batch is pushed (or on `wake`), false after `ms` (0: no time limit). */
  wait(ms: number): Promise<boolean> {
    return new Promise((resolve) => {
      const timer =
        ms > 0
          ? setTimeout(() => {
              this.waiter = undefined;
              resolve(false);
            }, ms)
          : undefined;
      this.waiter = () => {
        if (timer) clearTimeout(timer);
        this.waiter = undefined;
        resolve(true);
      };
    });
  }

  /** Ends the current `wait` at once (a batch came, or the subscriber closed). */
  wake(): void {
    this.waiter?.();
  }

  /** Whether a queued batch already shows a new publisher. */
  hasRestart(): boolean {
    return this.items.some((l) => l.restart);
  }

  /** Whether a queued batch came after a dropped connection (its check not yet made). */
  hasAfterDrop(): boolean {
    return this.items.some((l) => l.afterDrop);
  }

  shift(): Live | undefined {
    const item = this.items.shift();
    if (item) this.bytes -= item.payload.byteLength;
    return item;
  }

  /** Puts `item` back at the front (it waits for the history), whatever the bounds. */
  unshift(item: Live): void {
    this.items.unshift(item);
    this.bytes += item.payload.byteLength;
  }
}
