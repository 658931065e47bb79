/**
 * A warn line said at most once per `everyMs` for each key (a peer, a reason): what fails many times a
 * second is one line a minute, with how many were held back since. Bounded: keys past their window with
 * nothing held back are dropped first, then the oldest.
 */
export class SaidPerKey {
  private readonly said = new Map<string, { at: number; held: number }>();

  constructor(
    private readonly everyMs: number,
    private readonly maxKeys = 256,
  ) {}

  /** Whether `key` would be said at `now`. */
  due(key: string, now: number): boolean {
    const s = this.said.get(key);
    return s === undefined || now - s.at >= this.everyMs;
  }

  /** `key` happened at `now`: the count held back since it was last said when it is said now, else undefined. */
  take(key: string, now: number): number | undefined {
    const s = this.said.get(key);
    if (s !== undefined && now - s.at < this.everyMs) {
      s.held++;
      return undefined;
    }
    this.said.delete(key);
    for (const [k, e] of this.said) if (e.held === 0 && now - e.at >= this.everyMs) this.said.delete(k);
    if (this.said.size >= this.maxKeys) {
      const oldest = this.said.keys().next().value;
      if (oldest !== undefined) this.said.delete(oldest);
    }
    this.said.set(key, { at: now, held: 0 });
    return s?.held ?? 0;
  }

  /** `key` is gone (a peer forgotten): said at once if it comes back. */
  forget(key: string): void {
    this.said.delete(key);
  }

  get size(): number {
    return this.said.size;
  }
}
