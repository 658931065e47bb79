/**
 * Remembers recently seen nonces so a captured signed request cannot be replayed within the window.
 * Memory is bounded: when full, the oldest nonce is dropped and `floor` rises to its timestamp, and
 * the verifier then refuses anything at or below the floor as stale, so evicting never opens a replay.
 */
export class ReplayCache {
  private readonly seen = new Map<string, number>();
  private floorTs = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly windowMs: number,
    private readonly maxEntries: number,
  ) {
    if (!Number.isInteger(maxEntries) || maxEntries < 1)
      throw new RangeError("maxEntries must be a positive integer");
  }

  /** Timestamps at or below this can no longer be checked for replay. */
  get floor(): number {
    return this.floorTs;
  }

  get size(): number {
    return this.seen.size;
  }

  has(key: string): boolean {
    return this.seen.has(key);
  }

  /** Records `key` (signed at `ts`), forgetting entries that have left the window as of `now`. */
  add(key: string, ts: number, now: number): void {
    this.prune(now);
    if (this.seen.size >= this.maxEntries) {
      const oldest = this.seen.entries().next().value;
      if (oldest) {
        this.seen.delete(oldest[0]);
        this.floorTs = Math.max(this.floorTs, oldest[1]);
      }
    }
    this.seen.set(key, ts);
  }

  /**
   * Drops entries from the head (insertion order) that are outside the window; they are stale anyway.
   * The floor rises with them so a clock stepping back cannot make them acceptable again.
   */
  private prune(now: number): void {
    for (const [key, ts] of this.seen) {
      if (ts >= now - this.windowMs) break;
      this.seen.delete(key);
      this.floorTs = Math.max(this.floorTs, ts);
    }
  }
}
