/**
 * Open-addressing hash table from 48-bit block keys to per-key owner bitsets, in one typed array:
 * lookups on the routing hot path allocate nothing and box no doubles (a Map keyed by 48-bit numbers
 * costs a heap number per lookup and showed up as GC pauses at p99), and a probe touches one cache
 * line, because each slot stores [key low 32 bits, key high 16 bits, bitset words...] contiguously.
 *
 * Linear probing with backward-shift deletion (no tombstones), so a long-lived index never degrades.
 * Keys are hash outputs already, so the low bits index the table directly. An entry's position moves
 * on deletion: positions are never valid beyond the current call.
 */
import { invariant } from "./invariant.js";

/**
 * A free slot holds 0 in its hi word; a key's hi is stored + 1 (keys' hi are 16-bit). So a fresh
 * table is all zeros: allocating one at the key cap costs no pass over its millions of slots (the
 * pages are touched as keys arrive).
 */
const EMPTY = 0;

const TWO32 = 4294967296;
/** The halves a 48-bit key is stored as: the low 32 bits (as an int32) and the high 16. */
export const keyLo = (key: number): number => (key % TWO32) | 0;
export const keyHi = (key: number): number => Math.floor(key / TWO32);

export class KeyTable {
  /** Bitset words per key. */
  readonly words: number;
  /** Int32s per slot: lo, hi, then `words` bitset words. */
  readonly stride: number;
  private mask: number;
  /** Slot p is data[p * stride, +stride): lo, hi + 1 (0: free), bitset. Read directly on hot paths. */
  data: Int32Array;
  size = 0;

  constructor(words: number, initialCapacity = 1024) {
    this.words = words;
    this.stride = 2 + words;
    let cap = 16;
    while (cap < initialCapacity) cap *= 2;
    this.mask = cap - 1;
    this.data = KeyTable.emptyData(cap, this.stride);
  }

  private static emptyData(cap: number, stride: number): Int32Array {
    // All zeros is all free (EMPTY = 0): no pass over the slots, whose pages are touched as keys
    // arrive. A pass here held the event loop for the whole table when one at the key cap was made.
    return new Int32Array(cap * stride);
  }

  /** Slot of key (lo, hi), or -1. `hi` is a key's high 16 bits (0..65535). */
  find(lo: number, hi: number): number {
    const { mask, data, stride } = this;
    hi += 1;
    let i = lo & mask;
    for (;;) {
      const h = data[i * stride + 1]!;
      if (h === EMPTY) return -1;
      if (h === hi && data[i * stride] === lo) return i;
      i = (i + 1) & mask;
    }
  }

  /**
   * Room for `n` keys without growing: one resize to the final size instead of a doubling (and a
   * re-insert of everything) per power of two on the way there.
   */
  reserve(n: number): void {
    const cap = this.capacityFor(n);
    if (cap !== this.mask + 1) this.resize(cap);
  }

  /** The capacity `reserve(n)` would give this table (its own when it has room already). */
  capacityFor(n: number): number {
    let cap = this.mask + 1;
    while (n * 2 > cap) cap *= 2;
    return cap;
  }

  /**
   * Inserts the keys of slots [from, to) whose bitset is not empty into `dest` (same words), with
   * their bitsets (overwriting what `dest` held for them): a rehash done a range at a time.
   */
  copyInto(dest: KeyTable, from: number, to: number): void {
    invariant(dest.words === this.words, () => `KeyTable: copy into ${dest.words} words from ${this.words}`);
    reinsert(this.data, from, to, dest, false);
  }

  /**
   * Whether the next `insert` resizes the table (it keeps at most half its slots full): a caller
   * holding slot positions, or copying into it in steps, must know before it inserts.
   */
  growsOnInsert(): boolean {
    return (this.size + 1) * 2 > this.mask + 1;
  }

  /** Slot of key (lo, hi), inserted with an empty bitset if absent. */
  insert(lo: number, hi: number): number {
    if (this.growsOnInsert()) this.resize((this.mask + 1) * 2);
    const { mask, data, stride } = this;
    hi += 1;
    let i = lo & mask;
    for (;;) {
      const h = data[i * stride + 1]!;
      if (h === EMPTY) break;
      if (h === hi && data[i * stride] === lo) return i;
      i = (i + 1) & mask;
    }
    data[i * stride] = lo;
    data[i * stride + 1] = hi;
    this.size++;
    return i;
  }

  /** Removes the entry at slot `pos`, shifting later entries of its probe run back. */
  removeAt(pos: number): void {
    const { mask, data, stride } = this;
    let i = pos;
    let j = pos;
    for (;;) {
      j = (j + 1) & mask;
      if (data[j * stride + 1] === EMPTY) break;
      const k = data[j * stride]! & mask;
      // entry j may move to i only if its home k is not cyclically within (i, j]
      const stays = i <= j ? i < k && k <= j : i < k || k <= j;
      if (stays) continue;
      data.copyWithin(i * stride, j * stride, j * stride + stride);
      i = j;
    }
    data.fill(0, i * stride, i * stride + stride);
    data[i * stride + 1] = EMPTY;
    this.size--;
  }

  /** Bitset word `w` of slot `pos` (as int32). */
  word(pos: number, w: number): number {
    return this.data[pos * this.stride + 2 + w]!;
  }

  setBit(pos: number, bit: number): void {
    this.data[pos * this.stride + 2 + (bit >>> 5)]! |= 1 << (bit & 31);
  }

  clearBit(pos: number, bit: number): void {
    this.data[pos * this.stride + 2 + (bit >>> 5)]! &= ~(1 << (bit & 31));
  }

  /** True if no owner bit is set at `pos`. */
  isEmptyAt(pos: number): boolean {
    return bitsetEmpty(this.data, pos * this.stride, this.stride);
  }

  /** Calls fn(lo, hi) for every key. Do not modify the table meanwhile. */
  forEach(fn: (lo: number, hi: number) => void): void {
    const { data, stride } = this;
    for (let p = 0; p < data.length; p += stride) if (data[p + 1] !== EMPTY) fn(data[p]!, data[p + 1]! - 1);
  }

  /** Every key, as the 48-bit numbers keyLo and keyHi split (a copy). */
  keys(): Float64Array {
    const out = new Float64Array(this.size);
    let i = 0;
    this.forEach((lo, hi) => {
      out[i++] = hi * TWO32 + (lo >>> 0);
    });
    return out;
  }

  /** An independent table holding the same keys and bitsets in the same slots. */
  clone(): KeyTable {
    const c = new KeyTable(this.words, this.capacity);
    c.data.set(this.data);
    c.size = this.size;
    return c;
  }

  /** Calls fn(lo, hi) for every key in slots [from, to). Do not modify the table meanwhile. */
  forEachIn(from: number, to: number, fn: (lo: number, hi: number) => void): void {
    const { data, stride } = this;
    for (let p = from; p < to; p++)
      if (data[p * stride + 1] !== EMPTY) fn(data[p * stride]!, data[p * stride + 1]! - 1);
  }

  /**
   * Empties slots [from, to), for a table recycled in steps (on a fresh one it only touches its pages,
   * so later inserts do not fault them in one by one). Until every slot is wiped the table's probe
   * runs are broken: use it again only once `size` is 0 and the whole range was wiped.
   */
  wipe(from: number, to: number): void {
    const { data, stride } = this;
    for (let p = from; p < to; p++) if (data[p * stride + 1] !== EMPTY) this.size--;
    data.fill(0, from * stride, to * stride);
  }

  /** Slots (free or not): a caller walking `data` in steps visits slots 0..capacity-1. */
  get capacity(): number {
    return this.mask + 1;
  }

  private resize(cap: number): void {
    const { data: old, stride } = this;
    this.mask = cap - 1;
    this.data = KeyTable.emptyData(cap, stride);
    this.size = 0;
    reinsert(old, 0, old.length / stride, this, true);
  }
}

/**
 * Inserts into `dest` the keys held in slots [from, to) of `src` (slots of `dest`'s stride), with
 * their bitsets; `keepEmpty` false leaves out the keys whose bitset is empty. The one rehash loop,
 * for a resize (everything) and for a copy in steps (only keys some owner still holds).
 */
function reinsert(src: Int32Array, from: number, to: number, dest: KeyTable, keepEmpty: boolean): void {
  const { stride } = dest;
  for (let p = from; p < to; p++) {
    const b = p * stride;
    if (src[b + 1] === EMPTY || (!keepEmpty && bitsetEmpty(src, b, stride))) continue;
    const q = dest.insert(src[b]!, src[b + 1]! - 1) * stride;
    // Word by word: a subarray per key allocated millions of views in a large table's rehash.
    const out = dest.data;
    for (let w = 2; w < stride; w++) out[q + w] = src[b + w]!;
  }
}

/** Whether the slot at `base` of `data` has no owner bit set. */
function bitsetEmpty(data: Int32Array, base: number, stride: number): boolean {
  for (let w = 2; w < stride; w++) if (data[base + w] !== 0) return false;
  return true;
}
