/**
 * The PeerIndex's merged table (key → owner bitset) and the owners' own key sets, kept in step: a key's
 * bit is set exactly while its owner's set holds it. The merged table can grow in steps (`beginGrow`,
 * `growStep`) so a rehash of every key never holds the caller at once.
 */
import { KeyTable } from "./key-table.js";

export interface Owner {
  name: string;
  bit: number;
  /** The owner's own key set (a KeyTable without bitsets): typed arrays, no boxed doubles to collect. */
  keys: KeyTable;
}

export class MergedTable {
  private current: KeyTable;
  /**
   * The merged table's successor while it grows in steps (the `grow` phase of a staged replacement):
   * the table stays the one read; every change to it is made in `next` too, and a key whose bits
   * empty stays in the table (bits 0, a miss to `matchAll`) until the swap, so a backward shift never
   * moves a key past the copy's position. `next` takes slots [0, at) of the table so far.
   */
  private growing: { next: KeyTable; at: number } | undefined;

  constructor(private readonly words: number) {
    this.current = new KeyTable(words);
  }

  /** The table read (its successor, while it grows, is only written). */
  get table(): KeyTable {
    return this.current;
  }

  /** Starts growing in steps if `extra` more keys would resize the table; true if it does. */
  beginGrow(extra: number): boolean {
    const cap = this.current.capacityFor(this.current.size + extra);
    if (cap === this.current.capacity) return false;
    // A rehash of every key at once held the loop for as long as the apply: done in steps.
    this.growing = { next: new KeyTable(this.words, cap), at: 0 };
    return true;
  }

  /** Copies `slots` more slots of the merged table into its successor; swaps them once all are in. */
  growStep(slots: number): boolean {
    const g = this.growing;
    if (g === undefined) return true;
    const end = Math.min(this.current.capacity, g.at + slots);
    this.current.copyInto(g.next, g.at, end);
    g.at = end;
    if (end < this.current.capacity) return false;
    this.current = g.next;
    this.growing = undefined;
    return true;
  }

  addKey(o: Owner, lo: number, hi: number): void {
    const before = o.keys.size;
    o.keys.insert(lo, hi);
    if (o.keys.size !== before) this.setBit(lo, hi, o.bit);
  }

  removeKey(o: Owner, lo: number, hi: number): void {
    const pos = o.keys.find(lo, hi);
    if (pos < 0) return;
    o.keys.removeAt(pos);
    this.clearBit(lo, hi, o.bit);
  }

  setBit(lo: number, hi: number, bit: number): void {
    const g = this.growing;
    // The table would resize under the copy (others' keys outgrew it meanwhile): finish the copy first.
    if (g !== undefined && this.current.growsOnInsert()) this.growStep(Number.MAX_SAFE_INTEGER);
    this.current.setBit(this.current.insert(lo, hi), bit);
    if (this.growing !== undefined) this.growing.next.setBit(this.growing.next.insert(lo, hi), bit);
  }

  clearBit(lo: number, hi: number, bit: number): void {
    const pos = this.current.find(lo, hi);
    if (pos < 0) return;
    this.current.clearBit(pos, bit);
    const g = this.growing;
    if (g === undefined) {
      if (this.current.isEmptyAt(pos)) this.current.removeAt(pos);
      return;
    }
    const q = g.next.find(lo, hi);
    if (q < 0) return;
    g.next.clearBit(q, bit);
    if (g.next.isEmptyAt(q)) g.next.removeAt(q);
  }
}
