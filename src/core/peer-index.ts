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
 * allocation-free on the matchAll path. This file keeps the owners; the merged table and the owners' key
 * sets are peer-index-table.ts, the walk peer-index-match.ts, a replacement in steps peer-index-staged.ts.
 */
import { BLOCK_SIZE, BlockHasher } from "./block-hash.js";
import type { Tokens } from "./engine.js";
import { invariant } from "./invariant.js";
import { KeyTable, keyHi, keyLo } from "./key-table.js";
import { walkMatches } from "./peer-index-match.js";
import { StagedReplace } from "./peer-index-staged.js";
import { MergedTable, type Owner } from "./peer-index-table.js";
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

export class PeerIndex {
  readonly blockSize = BLOCK_SIZE;
  readonly maxOwners: number;
  readonly maxKeysPerOwner: number;
  private readonly words: number;
  /** The merged key → owner bitset table, and each owner's key set kept in step with it. */
  private readonly merged: MergedTable;
  private readonly byName = new Map<string, Owner>();
  private readonly byBit: (Owner | undefined)[];
  private readonly live: Uint32Array;
  private readonly active: Uint32Array;
  private readonly hasher = new BlockHasher();
  private ownerList: string[] = [];
  private posOfBit: Int32Array;
  private lengths = new Int32Array(0);
  /** The one estimate being replaced in steps, if any, and the key set kept for the next. */
  private readonly stager: StagedReplace;
  /** Per-owner caps below `maxKeysPerOwner` (from what each owner advertised it can hold). */
  private readonly caps = new Map<string, number>();

  constructor(opts: PeerIndexOptions = {}) {
    const maxOwners = opts.maxOwners ?? 64;
    if (!Number.isInteger(maxOwners) || maxOwners < 1 || maxOwners > 4096) {
      throw new RangeError(`PeerIndex: maxOwners must be an integer in [1, 4096], got ${maxOwners}`);
    }
    this.maxOwners = maxOwners;
    this.maxKeysPerOwner = opts.maxKeysPerOwner ?? 1 << 21;
    this.words = Math.ceil(maxOwners / 32);
    this.merged = new MergedTable(this.words);
    this.stager = new StagedReplace(this.merged);
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
      if (next.find(lo, hi) < 0) this.merged.clearBit(lo, hi, o.bit);
    });
    next.forEach((lo, hi) => {
      if (old.find(lo, hi) < 0) this.merged.setBit(lo, hi, o.bit);
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
      this.merged.removeKey(o, keyLo(k), keyHi(k));
    }
    // Sized from the delta: at most one resize of the owner's table, not one per doubling.
    o.keys.reserve(Math.min(o.keys.size + delta.added.length, cap));
    for (let i = 0; i < delta.added.length && o.keys.size < cap; i++) {
      const k = delta.added[i]!;
      this.merged.addKey(o, keyLo(k), keyHi(k));
    }
  }

  /** Drops `owner` and its estimate; cost ≈ its estimate's size. */
  removePeer(owner: string): void {
    const o = this.byName.get(owner);
    if (o === undefined) return;
    this.stager.drop(o);
    o.keys.forEach((lo, hi) => {
      this.merged.clearBit(lo, hi, o.bit);
    });
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
    if (this.stager.current?.owner.name === owner) return;
    const o = this.byName.get(owner);
    if (o === undefined) return;
    const cap = this.capOf(owner);
    const n = Math.floor(tokens.length / BLOCK_SIZE);
    this.hasher.reset();
    for (let b = 0; b < n && o.keys.size < cap; b++) {
      this.hasher.step(tokens, b * BLOCK_SIZE);
      this.merged.addKey(o, this.hasher.lo, this.hasher.hi);
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
    const hidden = this.stager.current?.owner.bit;
    if (hidden !== undefined) {
      active[hidden >>> 5]! &= ~(1 << (hidden & 31));
      lengths[pos[hidden]!] = 0;
      any = 0;
      for (let w = 0; w < W; w++) any |= active[w]!;
    }
    walkMatches(tokens, this.merged.table, this.hasher, active, any, pos, lengths);
    return { owners: this.ownerList, lengths };
  }

  /** `owner`'s estimated match for `tokens` (0 for an unknown owner). */
  match(owner: string, tokens: Tokens): number {
    const o = this.byName.get(owner);
    if (o === undefined || this.stager.current?.owner === o) return 0;
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
    return this.merged.table.size;
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
    return this.stager.current?.owner.name;
  }

  /** Starts replacing `owner`'s estimate by `body` in steps (one at a time); `stepReplace` does the work. */
  beginReplace(owner: string, body: SnapshotBody): void {
    this.checkBlockSize(body.blockSize);
    invariant(
      this.stager.current === undefined,
      () => `PeerIndex: ${owner} staged while ${this.replacing} is`,
    );
    const o = this.ownerFor(owner);
    const n = Math.min(body.keys.length, this.capOf(owner));
    this.stager.begin(o, body, n);
  }

  /**
   * Does at most about `budget` keys' (or slots') work of the staged replacement; true once it is
   * complete (the owner matches again, at its new estimate). When the merged table needs room for the
   * new keys it grows in steps of its own (`grow`) before the set phase.
   */
  stepReplace(budget: number): boolean {
    return this.stager.step(budget);
  }

  // ---- internals ----

  private checkNotStaged(owner: string): void {
    invariant(this.stager.current?.owner.name !== owner, () => `PeerIndex: ${owner} changed mid-replacement`);
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
}
