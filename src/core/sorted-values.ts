/**
 * A multiset of numbers kept in order, for a median read often and changed by one value at a time:
 * each change is a binary search and one move of the tail, each read O(1), where sorting on every
 * read cost O(n log n) after each change.
 */
export class SortedValues {
  private readonly v: number[] = [];

  get size(): number {
    return this.v.length;
  }

  /** The first index whose value is not below `x`. */
  private lowerBound(x: number): number {
    let lo = 0;
    let hi = this.v.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((this.v[mid] as number) < x) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  add(x: number): void {
    this.v.splice(this.lowerBound(x), 0, x);
  }

  /** Removes one copy of `x`; false if there is none. */
  delete(x: number): boolean {
    const i = this.lowerBound(x);
    if (this.v[i] !== x) return false;
    this.v.splice(i, 1);
    return true;
  }

  clear(): void {
    this.v.length = 0;
  }

  /** The median (the mean of the middle two for an even count); undefined when empty. */
  median(): number | undefined {
    const n = this.v.length;
    if (n === 0) return undefined;
    const m = n >> 1;
    return n % 2 ? this.v[m] : ((this.v[m - 1] as number) + (this.v[m] as number)) / 2;
  }
}
