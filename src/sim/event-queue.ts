/**
 * The simulator's agenda: a binary min-heap ordered by (time, insertion sequence), so events at the
 * same virtual time run in the order they were scheduled — runs replay exactly.
 */
export interface SimEvent {
  at: number;
  seq: number;
}

/** Omit over each member of a union (plain Omit would merge the members). */
export type WithoutSeq<E> = E extends unknown ? Omit<E, "seq"> : never;

export class EventQueue<E extends SimEvent> {
  /**
   * Slots [0, n) hold the heap; the array never shrinks (a pop that shrank it made V8 reallocate and
   * copy the backing store as the agenda swung, a large share of the simulator's garbage).
   */
  private heap: (E | undefined)[] = [];
  private n = 0;
  private seq = 0;

  get size(): number {
    return this.n;
  }

  /** Schedules `ev` (its `seq` is assigned here). */
  push(ev: WithoutSeq<E>): void {
    const e = ev as unknown as E;
    e.seq = this.seq++;
    const h = this.heap;
    let i = this.n++;
    if (i === h.length) h.push(e);
    while (i > 0) {
      const p = (i - 1) >> 1;
      const parent = h[p] as E;
      if (parent.at < e.at || (parent.at === e.at && parent.seq < e.seq)) break;
      h[i] = parent;
      i = p;
    }
    h[i] = e;
  }

  peekTime(): number | undefined {
    return this.n === 0 ? undefined : this.heap[0]?.at;
  }

  pop(): E | undefined {
    if (this.n === 0) return undefined;
    const h = this.heap;
    const top = h[0] as E;
    const n = --this.n;
    const last = h[n] as E;
    h[n] = undefined; // released: a popped event is not kept alive by the agenda
    if (n > 0) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= n) break;
        const r = l + 1;
        let c = l;
        let child = h[l] as E;
        if (r < n) {
          const rc = h[r] as E;
          if (rc.at < child.at || (rc.at === child.at && rc.seq < child.seq)) {
            c = r;
            child = rc;
          }
        }
        if (last.at < child.at || (last.at === child.at && last.seq < child.seq)) break;
        h[i] = child;
        i = c;
      }
      h[i] = last;
    }
    return top;
  }
}
