/**
 * The waits between hellos of the background checks (static peers, `--join` seeds): a refused one
 * waits up to the re-check ceiling (minutes). `stop()` ends every wait at once, and any later one
 * before it starts, so no check's timer outlives the node that set it.
 */
export class RecheckWaits {
  private readonly waiting = new Map<NodeJS.Timeout, () => void>();
  private stopped_ = false;

  /** Waits `ms`; true when the wait ran out, false when the waits were (or are) stopped. */
  wait(ms: number): Promise<boolean> {
    if (this.stopped_) return Promise.resolve(false);
    return new Promise((res) => {
      const t = setTimeout(() => {
        this.waiting.delete(t);
        res(true);
      }, ms);
      t.unref();
      this.waiting.set(t, () => res(false));
    });
  }

  get stopped(): boolean {
    return this.stopped_;
  }

  /** Ends every wait (each resolves false) and refuses new ones. */
  stop(): void {
    this.stopped_ = true;
    for (const [t, end] of this.waiting) {
      clearTimeout(t);
      end();
    }
    this.waiting.clear();
  }

  /** Waits now pending (for tests: none after stop). */
  get size(): number {
    return this.waiting.size;
  }
}
