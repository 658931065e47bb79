/**
 * The N−1 read-only estimates T̂_j merged into one multi-owner structure, so a single O(L) walk over a
 * request answers getBestNode's "estimated match for every owner" (SGLang's gateway keeps one
 * multi-tenant tree for the same reason).
 *
 * Structure: a chained block key names a whole prefix (block-hash.ts), so the merged tree is a map
 * key → owner bitset. Walking a request = hashing its blocks in order and looking each up; an owner's
 * match ends at the first block whose bitset lacks it. Matches are block-granular (multiples of
 * BLOCK_SIZE tokens, rounded down) — good enough to route; the node's own tree stays token-exact.
 *
 * Bitsets live in a typed-array hash table (key-table.ts, W words per key): compact at 64+ owners and
 * allocation-free on the matchAll path.
 */
import { BLOCK_SIZE, BlockHasher } from "./block-hash.js";
import type { Tokens } from "./engine.js";
import { invariant } from "./invariant.js";
import { KeyTable, keyHi, keyLo } from "./key-table.js";
import type { SnapshotBody, SnapshotDelta } from "./snapshot.js";

export interface MatchAll {
  owners: readonly string[];
  /** lengths[i] is owners[i]'s estimated match. Reused by the next call: copy to keep. */
  lengths: Int32Array;
}

export interface PeerIndexOptions {
  /** Most owners at once (default 64). */
  maxOwners?: number;
  /**
   * Most keys one owner's estimate may hold (default 2^21 = 33M tokens); adds beyond it are dropped,
   * so a peer cannot grow our memory without bound through deltas or forwards.
   */
  maxKeysPerOwner?: number;
}

interface Owner {
  name: string;
  bit: number;
  /** The owner's own key set (a KeyTable without bitsets): typed arrays, no boxed doubles to collect. */
  keys: KeyTable;
}

/**
 * A replacement of one owner's estimate done in bounded steps (`stepReplace`), so a snapshot at the key
 * cap never holds the caller for long. Phases: wipe the table the owner's next key set goes in (a
 * recycled one, or a fresh one whose pages are touched in order rather than faulted in by random
 * inserts), build that set from the body, clear the old keys it lacks, set the new keys the old
 * lacked. While it runs the owner is hidden from matches (it matches nothing): its bits are a mix of
 * two versions and must not be routed on.
 */
interface Staged {
  owner: Owner;
  body: SnapshotBody;
  /** Taken by the first step (a table for millions of keys is a step's work of its own). */
  next: KeyTable | undefined;
  /** Keys of `body` to take (its length, capped). */
  n: number;
  phase: "wipe" | "build" | "clear" | "grow" | "set";
  /** Position in the phase: a body index while building, else a slot of the table walked. */
  at: number;
}

/** Slots wiped per unit of step budget: a sequential fill costs far less per slot than an insert. */
const WIPE_SLOTS_PER_KEY = 8;
/** A replaced key set at least this large (slots) is kept for the next staged replacement. */
const SPARE_MIN_SLOTS = 1 << 16;

export class PeerIndex {
  readonly blockSize = BLOCK_SIZE;
  readonly maxOwners: number;
  readonly maxKeysPerOwner: number;
  private readonly words: number;
  private table: KeyTable;
  /**
   * The merged table's successor while it grows in steps (the `grow` phase of a staged replacement):
   * the table stays the one read; every change to it is made in `next` too, and a key whose bits
   * empty stays in the table (bits 0, a miss to `matchAll`) until the swap, so a backward shift never
   * moves a key past the copy's position. `next` takes slots [0, at) of the table so far.
   */
  private growing: { next: KeyTable; at: number } | undefined;
  private readonly byName = new Map<string, Owner>();
  private readonly byBit: (Owner | undefined)[];
  private readonly live: Uint32Array;
  private readonly active: Uint32Array;
  private readonly hasher = new BlockHasher();
  private ownerList: string[] = [];
  private posOfBit: Int32Array;
  private lengths = new Int32Array(0);
  private staged: Staged | undefined;
  /** Per-owner caps below `maxKeysPerOwner` (from what each owner advertised it can hold). */
  private readonly caps = new Map<string, number>();
  /**
   * The key set a staged replacement last replaced, reused by the next one of a like size: at the key
   * cap that is 32 MB a snapshot need not allocate (and the collector need not reclaim). One at most.
   */
  private spare: KeyTable | undefined;

  constructor(opts: PeerIndexOptions = {}) {
    const maxOwners = opts.maxOwners ?? 64;
    if (!Number.isInteger(maxOwners) || maxOwners < 1 || maxOwners > 4096) {
      throw new RangeError(`PeerIndex: maxOwners must be an integer in [1, 4096], got ${maxOwners}`);
    }
    this.maxOwners = maxOwners;
    this.maxKeysPerOwner = opts.maxKeysPerOwner ?? 1 << 21;
    this.words = Math.ceil(maxOwners / 32);
    this.table = new KeyTable(this.words);
    this.byBit = new Array(maxOwners).fill(undefined);
    this.live = new Uint32Array(this.words);
    this.active = new Uint32Array(this.words);
    this.posOfBit = new Int32Array(maxOwners).fill(-1);
  }

  /** Replaces `owner`'s estimate by `body`; cost ≈ old + new size of that owner's estimate. */
  replaceEstimate(owner: string, body: SnapshotBody): void {
    this.checkBlockSize(body.blockSize);
    this.checkNotStaged(owner);
    const o = this.ownerFor(owner);
    const n = Math.min(body.keys.length, this.capOf(owner));
    const next = new KeyTable(0, 2 * n);
    for (let i = 0; i < n; i++) next.insert(keyLo(body.keys[i]!), keyHi(body.keys[i]!));
    const old = o.keys;
    old.forEach((lo, hi) => {
      if (next.find(lo, hi) < 0) this.clearBit(lo, hi, o.bit);
    });
    next.forEach((lo, hi) => {
      if (old.find(lo, hi) < 0) this.setBit(lo, hi, o.bit);
    });
    o.keys = next;
  }

  /** Applies a delta to `owner`'s estimate; cost ≈ size of the delta. Ordering is the caller's job (Estimates). */
  applyDelta(owner: string, delta: SnapshotDelta): void {
    this.checkNotStaged(owner);
    const o = this.ownerFor(owner);
    const cap = this.capOf(owner);
    for (let i = 0; i < delta.removed.length; i++) {
      const k = delta.removed[i]!;
      this.removeKey(o, keyLo(k), keyHi(k));
    }
    // Sized from the delta: at most one resize of the owner's table, not one per doubling.
    o.keys.reserve(Math.min(o.keys.size + delta.added.length, cap));
    for (let i = 0; i < delta.added.length && o.keys.size < cap; i++) {
      const k = delta.added[i]!;
      this.addKey(o, keyLo(k), keyHi(k));
    }
  }

  /** Drops `owner` and its estimate; cost ≈ its estimate's size. */
  removePeer(owner: string): void {
    const o = this.byName.get(owner);
    if (o === undefined) return;
    const clear = (lo: number, hi: number) => this.clearBit(lo, hi, o.bit);
    if (this.staged?.owner === o) {
      // The grow belongs to the replacement being dropped: finish it, so no emptied key stays behind.
      this.growStep(Number.MAX_SAFE_INTEGER);
      // Bits of the half-applied next set may be set too: clear both sets.
      if (this.staged.phase === "clear" || this.staged.phase === "set") this.staged.next?.forEach(clear);
      this.staged = undefined;
    }
    o.keys.forEach(clear);
    this.byName.delete(owner);
    this.byBit[o.bit] = undefined;
    this.live[o.bit >>> 5]! &= ~(1 << (o.bit & 31));
    this.rebuildOwnerList();
  }

  /**
   * Paper line 17: optimistically add a just-forwarded request to `owner`'s estimate. Only to an
   * estimate held: an owner we hold none of (no snapshot yet, removed, or not among the
   * `--max-estimates` held) gets no guess, which would take an owner slot past that bound.
   */
  updateTrieEstimate(owner: string, tokens: Tokens): void {
    // Mid-replacement the snapshot being applied is the truth; a guess on top would be lost anyway.
    if (this.staged?.owner.name === owner) return;
    const o = this.byName.get(owner);
    if (o === undefined) return;
    const cap = this.capOf(owner);
    const n = Math.floor(tokens.length / BLOCK_SIZE);
    this.hasher.reset();
    for (let b = 0; b < n && o.keys.size < cap; b++) {
      this.hasher.step(tokens, b * BLOCK_SIZE);
      this.addKey(o, this.hasher.lo, this.hasher.hi);
    }
  }

  /** One walk over `tokens`: every owner's estimated match (block-granular). */
  matchAll(tokens: Tokens): MatchAll {
    const W = this.words;
    const active = this.active;
    const lengths = this.lengths;
    const pos = this.posOfBit;
    let any = 0;
    for (let w = 0; w < W; w++) {
      active[w] = this.live[w]!;
      any |= active[w]!;
    }
    const hidden = this.staged?.owner.bit;
    if (hidden !== undefined) {
      active[hidden >>> 5]! &= ~(1 << (hidden & 31));
      lengths[pos[hidden]!] = 0;
      any = 0;
      for (let w = 0; w < W; w++) any |= active[w]!;
    }
    const n = Math.floor(tokens.length / BLOCK_SIZE);
    let b = 0;
    if (any !== 0) {
      this.hasher.reset();
      const hasher = this.hasher;
      const table = this.table;
      for (; b < n; b++) {
        hasher.step(tokens, b * BLOCK_SIZE);
        const slot = table.find(hasher.lo, hasher.hi);
        const matched = b * BLOCK_SIZE;
        any = 0;
        if (slot < 0) {
          for (let w = 0; w < W; w++) {
            dropBits(active[w]!, w, matched, pos, lengths);
            active[w] = 0;
          }
          break;
        }
        const base = slot * table.stride + 2;
        const data = table.data;
        for (let w = 0; w < W; w++) {
          const a = active[w]!;
          const keep = a & data[base + w]!;
          if (a !== keep) dropBits(a & ~keep, w, matched, pos, lengths);
          active[w] = keep;
          any |= keep;
        }
        if (any === 0) break;
      }
    }
    if (b === n) {
      for (let w = 0; w < W; w++) dropBits(active[w]!, w, n * BLOCK_SIZE, pos, lengths);
    }
    return { owners: this.ownerList, lengths };
  }

  /** `owner`'s estimated match for `tokens` (0 for an unknown owner). */
  match(owner: string, tokens: Tokens): number {
    const o = this.byName.get(owner);
    if (o === undefined || this.staged?.owner === o) return 0;
    const n = Math.floor(tokens.length / BLOCK_SIZE);
    this.hasher.reset();
    let b = 0;
    for (; b < n; b++) {
      this.hasher.step(tokens, b * BLOCK_SIZE);
      if (o.keys.find(this.hasher.lo, this.hasher.hi) < 0) break;
    }
    return b * BLOCK_SIZE;
  }

  /** Tokens in `owner`'s estimate (block-granular: blocks × BLOCK_SIZE). */
  estimateSize(owner: string): number {
    return (this.byName.get(owner)?.keys.size ?? 0) * BLOCK_SIZE;
  }

  /** The keys of `owner`'s estimate (a copy; for checks such as "estimate equals the owner's tree"). */
  estimateKeys(owner: string): Float64Array {
    return this.byName.get(owner)?.keys.keys() ?? new Float64Array(0);
  }

  owners(): string[] {
    return [...this.ownerList];
  }

  has(owner: string): boolean {
    return this.byName.has(owner);
  }

  /** Distinct keys across all owners (memory / test introspection). */
  get keyCount(): number {
    return this.table.size;
  }

  /**
   * Caps `owner`'s estimate at `keys` (what it said it can hold), below `maxKeysPerOwner`. Applies to
   * what arrives from now on; an estimate already larger is trimmed by its next full snapshot.
   */
  capOwner(owner: string, keys: number | undefined): void {
    if (keys === undefined) {
      this.caps.delete(owner);
      return;
    }
    if (!Number.isSafeInteger(keys) || keys < 0) throw new RangeError(`PeerIndex: bad cap ${keys}`);
    this.caps.set(owner, Math.min(keys, this.maxKeysPerOwner));
  }

  /** The most keys `owner`'s estimate may hold. */
  capOf(owner: string): number {
    return this.caps.get(owner) ?? this.maxKeysPerOwner;
  }

  /** The owner whose estimate is being replaced in steps, if any (it matches nothing meanwhile). */
  get replacing(): string | undefined {
    return this.staged?.owner.name;
  }

  /** Starts replacing `owner`'s estimate by `body` in steps (one at a time); `stepReplace` does the work. */
  beginReplace(owner: string, body: SnapshotBody): void {
    this.checkBlockSize(body.blockSize);
    invariant(this.staged === undefined, () => `PeerIndex: ${owner} staged while ${this.replacing} is`);
    const o = this.ownerFor(owner);
    const n = Math.min(body.keys.length, this.capOf(owner));
    this.staged = { owner: o, body, next: undefined, n, phase: "wipe", at: 0 };
  }

  /**
   * Does at most about `budget` keys' (or slots') work of the staged replacement; true once it is
   * complete (the owner matches again, at its new estimate). When the merged table needs room for the
   * new keys it grows in steps of its own (`grow`) before the set phase.
   */
  stepReplace(budget: number): boolean {
    const s = this.staged;
    if (s === undefined) return true;
    const o = s.owner;
    const keys = s.body.keys;
    let left = Math.max(1, budget);
    if (s.next === undefined) {
      s.next = this.takeTable(2 * s.n);
      return false;
    }
    const next = s.next;
    if (s.phase === "wipe") {
      const end = Math.min(next.capacity, s.at + left * WIPE_SLOTS_PER_KEY);
      next.wipe(s.at, end);
      s.at = end;
      if (end < next.capacity) return false;
      invariant(next.size === 0, () => `PeerIndex: a wiped key set holds ${next.size} keys`);
      s.phase = "build";
      s.at = 0;
      return false;
    }
    if (s.phase === "build") {
      const end = Math.min(s.n, s.at + left);
      for (let i = s.at; i < end; i++) next.insert(keyLo(keys[i]!), keyHi(keys[i]!));
      left -= end - s.at;
      s.at = end;
      if (end < s.n) return false;
      s.phase = "clear";
      s.at = 0;
    }
    if (s.phase === "clear") {
      const capacity = o.keys.capacity;
      const end = Math.min(capacity, s.at + left);
      o.keys.forEachIn(s.at, end, (lo, hi) => {
        if (next.find(lo, hi) < 0) this.clearBit(lo, hi, o.bit);
      });
      left -= end - s.at;
      s.at = end;
      if (end < capacity) return false;
      s.at = 0;
      s.phase = "set";
      const cap = this.table.capacityFor(this.table.size + next.size);
      if (cap !== this.table.capacity) {
        // A rehash of every key at once held the loop for as long as the apply: done in steps.
        this.growing = { next: new KeyTable(this.words, cap), at: 0 };
        s.phase = "grow";
      }
      return false;
    }
    if (s.phase === "grow") {
      if (!this.growStep(left * 2)) return false;
      s.phase = "set";
      return false;
    }
    const capacity = next.capacity;
    const end = Math.min(capacity, s.at + left);
    next.forEachIn(s.at, end, (lo, hi) => {
      if (o.keys.find(lo, hi) < 0) this.setBit(lo, hi, o.bit);
    });
    s.at = end;
    if (end < capacity) return false;
    if (o.keys.capacity >= SPARE_MIN_SLOTS) this.spare = o.keys;
    o.keys = next;
    this.staged = undefined;
    return true;
  }

  /** Copies `slots` more slots of the merged table into its successor; swaps them once all are in. */
  private growStep(slots: number): boolean {
    const g = this.growing;
    if (g === undefined) return true;
    const end = Math.min(this.table.capacity, g.at + slots);
    this.table.copyInto(g.next, g.at, end);
    g.at = end;
    if (end < this.table.capacity) return false;
    this.table = g.next;
    this.growing = undefined;
    return true;
  }

  /** A key set with room for `slots`: the spare if it is of that size (up to twice), else a new one. */
  private takeTable(slots: number): KeyTable {
    const spare = this.spare;
    this.spare = undefined;
    if (spare !== undefined && spare.capacity >= slots && spare.capacity <= 2 * Math.max(16, slots)) {
      return spare;
    }
    return new KeyTable(0, slots);
  }

  // ---- internals ----

  private checkNotStaged(owner: string): void {
    invariant(this.staged?.owner.name !== owner, () => `PeerIndex: ${owner} changed mid-replacement`);
  }

  private checkBlockSize(blockSize: number): void {
    if (blockSize !== BLOCK_SIZE) {
      throw new RangeError(`PeerIndex: block size ${blockSize} differs from ${BLOCK_SIZE}`);
    }
  }

  private ownerFor(name: string): Owner {
    const found = this.byName.get(name);
    if (found !== undefined) return found;
    const bit = this.byBit.indexOf(undefined);
    if (bit < 0) throw new RangeError(`PeerIndex: more than ${this.maxOwners} owners`);
    const o: Owner = { name, bit, keys: new KeyTable(0, 64) };
    this.byName.set(name, o);
    this.byBit[bit] = o;
    this.live[bit >>> 5]! |= 1 << (bit & 31);
    this.rebuildOwnerList();
    return o;
  }

  private rebuildOwnerList(): void {
    this.ownerList = [];
    this.posOfBit.fill(-1);
    for (let bit = 0; bit < this.maxOwners; bit++) {
      const o = this.byBit[bit];
      if (o === undefined) continue;
      this.posOfBit[bit] = this.ownerList.length;
      this.ownerList.push(o.name);
    }
    Object.freeze(this.ownerList);
    this.lengths = new Int32Array(this.ownerList.length);
  }

  private addKey(o: Owner, lo: number, hi: number): void {
    const before = o.keys.size;
    o.keys.insert(lo, hi);
    if (o.keys.size !== before) this.setBit(lo, hi, o.bit);
  }

  private removeKey(o: Owner, lo: number, hi: number): void {
    const pos = o.keys.find(lo, hi);
    if (pos < 0) return;
    o.keys.removeAt(pos);
    this.clearBit(lo, hi, o.bit);
  }

  private setBit(lo: number, hi: number, bit: number): void {
    const g = this.growing;
    // The table would resize under the copy (others' keys outgrew it meanwhile): finish the copy first.
    if (g !== undefined && this.table.growsOnInsert()) this.growStep(Number.MAX_SAFE_INTEGER);
    this.table.setBit(this.table.insert(lo, hi), bit);
    if (this.growing !== undefined) this.growing.next.setBit(this.growing.next.insert(lo, hi), bit);
  }

  private clearBit(lo: number, hi: number, bit: number): void {
    const pos = this.table.find(lo, hi);
    if (pos < 0) return;
    this.table.clearBit(pos, bit);
    const g = this.growing;
    if (g === undefined) {
      if (this.table.isEmptyAt(pos)) this.table.removeAt(pos);
      return;
    }
    const q = g.next.find(lo, hi);
    if (q < 0) return;
    g.next.clearBit(q, bit);
    if (g.next.isEmptyAt(q)) g.next.removeAt(q);
  }
}

/** Sets lengths[] = `matched` for every owner bit set in `bits` (word `w`). */
function dropBits(bits: number, w: number, matched: number, pos: Int32Array, lengths: Int32Array): void {
  while (bits !== 0) {
    const low = bits & -bits;
    const bit = (w << 5) + (31 - Math.clz32(low));
    lengths[pos[bit]!] = matched;
    bits ^= low;
  }
}
