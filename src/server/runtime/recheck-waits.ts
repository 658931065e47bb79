/**
 * The waits between hellos of the background checks (static peers, `--join` seeds): a refused one
 * waits up to the re-check ceiling (minutes). `stop()` ends every wait at once, and any later one
 * before it starts, so no check's timer outlives the node that set it. A wait may be woken early (a
 * static peer backing off unanswered seen restarted: static-peer-checks.ts).
 */
export class RecheckWaits {
  private readonly waiting = new Map<NodeJS.Timeout, () => void>();
  private stopped_ = false;

  /**
   * Waits `ms`; true when the wait ran out (or `wake` ended it early), false when the waits were (or
   * are) stopped.
   */
  wait(ms: number, wake?: AbortSignal): Promise<boolean> {
    if (this.stopped_) return Promise.resolve(false);
    if (wake?.aborted) return Promise.resolve(true);
    return new Promise((res) => {
      const end = (ranOut: boolean) => {
        clearTimeout(t);
        this.waiting.delete(t);
        wake?.removeEventListener("abort", woken);
        res(ranOut);
      };
      const woken = () => end(true);
      const t = setTimeout(() => end(true), ms);
      t.unref();
      this.waiting.set(t, () => end(false));
      wake?.addEventListener("abort", woken, { once: true });
    });
  }

  get stopped(): boolean {
    return this.stopped_;
  }

  /** Ends every wait (each resolves false) and refuses new ones. */
  stop(): void {
    this.stopped_ = true;
    for (const end of [...this.waiting.values()]) end();
    this.waiting.clear();
  }

  /** Waits now pending (for tests: none after stop). */
  get size(): number {
    return this.waiting.size;
  }
}
