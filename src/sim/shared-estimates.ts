/**
 * Oracle runs only (SIMULATION): the peer index every node keeps, with one key set per owner shared
 * by all the nodes whose estimate of it is the same. The oracle pushes every owner's changes to every
 * peer as the same snapshot object, so every peer's estimate of an owner is the same key set; held as
 * N − 1 private copies inside each node's merged table (an N-bit owner set per key) they cost
 * O(N² × keys) bits, which did not fit at 1,024 nodes.
 *
 * A key set is made once per (snapshot body, cap) or (delta, base key set, cap) and never changed
 * after; every node applying that same body or delta to that same base takes the same object. A node
 * whose estimate departs from it (an optimistic insert adding a key the owner's set lacks) gets a
 * private copy, changed in place from then on, exactly as its own table would be. So each estimate
 * holds the same keys as `PeerIndex` would, and every match is the same: `matchAll` walks each owner's
 * set instead of one merged table, which gives each owner's first missing block just the same.
 *
 * Not supported: a replacement in steps (`estimateStepKeys` > 0); the simulator uses this index only
 * when that is 0.
 */
import { BLOCK_SIZE, BlockHasher } from "../core/block-hash.js";
import type { Tokens } from "../core/engine.js";
import { KeyTable, keyHi, keyLo } from "../core/key-table.js";
import { type MatchAll, PeerIndex } from "../core/peer-index.js";
import type { SnapshotBody, SnapshotDelta } from "../core/snapshot.js";

interface Made {
  cap: number;
  keys: KeyTable;
}

/** The key sets made so far in one run (each kept while its body, or its delta and base set, is reachable). */
export class SharedKeySets {
  private readonly fromBody = new WeakMap<SnapshotBody, Made>();
  private readonly fromDelta = new WeakMap<SnapshotDelta, WeakMap<KeyTable, Made>>();
  /** Sets made, and sets taken from the cache (tests, reports). */
  made = 0;
  reused = 0;

  /** The set a full snapshot's body gives at `cap` keys; `shared` false: the caller's alone. */
  ofBody(body: SnapshotBody, cap: number): { keys: KeyTable; shared: boolean } {
    const hit = this.fromBody.get(body);
    if (hit !== undefined && hit.cap === cap) {
      this.reused++;
      return { keys: hit.keys, shared: true };
    }
    const n = Math.min(body.keys.length, cap);
    const keys = new KeyTable(0, 2 * n);
    for (let i = 0; i < n; i++) keys.insert(keyLo(body.keys[i]!), keyHi(body.keys[i]!));
    this.made++;
    // A body seen at another cap is not cached a second time: the first cap keeps the entry.
    if (hit !== undefined) return { keys, shared: false };
    this.fromBody.set(body, { cap, keys });
    return { keys, shared: true };
  }

  /** The set `delta` gives on top of the shared set `base` at `cap` keys (same rules as `PeerIndex`). */
  ofDelta(base: KeyTable, delta: SnapshotDelta, cap: number): { keys: KeyTable; shared: boolean } {
    let byBase = this.fromDelta.get(delta);
    const hit = byBase?.get(base);
    if (hit !== undefined && hit.cap === cap) {
      this.reused++;
      return { keys: hit.keys, shared: true };
    }
    const keys = base.clone();
    applyDeltaTo(keys, delta, cap);
    this.made++;
    if (hit !== undefined) return { keys, shared: false };
    if (byBase === undefined) {
      byBase = new WeakMap();
      this.fromDelta.set(delta, byBase);
    }
    byBase.set(base, { cap, keys });
    return { keys, shared: true };
  }
}

/** `PeerIndex.applyDelta` on one owner's key set: removals, then additions while under the cap. */
function applyDeltaTo(keys: KeyTable, delta: SnapshotDelta, cap: number): void {
  for (let i = 0; i < delta.removed.length; i++) {
    const k = delta.removed[i]!;
    const pos = keys.find(keyLo(k), keyHi(k));
    if (pos >= 0) keys.removeAt(pos);
  }
  keys.reserve(Math.min(keys.size + delta.added.length, cap));
  for (let i = 0; i < delta.added.length && keys.size < cap; i++) {
    const k = delta.added[i]!;
    keys.insert(keyLo(k), keyHi(k));
  }
}

interface Entry {
  name: string;
  bit: number;
  keys: KeyTable;
  /** Whether `keys` may be shared with other nodes (then it is never changed in place). */
  shared: boolean;
}

const EMPTY_KEYS = new KeyTable(0, 16);

export class SharedPeerIndex extends PeerIndex {
  private readonly entries = new Map<string, Entry>();
  private readonly slots: (Entry | undefined)[];
  /** No bit below this is free (the lowest free bit is taken, as `PeerIndex` does). */
  private lowFree = 0;
  private held: Entry[] = [];
  private heldNames: readonly string[] = Object.freeze([]);
  private heldStale = false;
  private lens = new Int32Array(0);
  private los = new Int32Array(64);
  private his = new Int32Array(64);
  private readonly hash = new BlockHasher();

  constructor(
    maxOwners: number,
    private readonly sets: SharedKeySets,
  ) {
    // The base's merged table is never used: the smallest one.
    super({ maxOwners: 1 });
    (this as { maxOwners: number }).maxOwners = maxOwners;
    this.slots = new Array<Entry | undefined>(maxOwners).fill(undefined);
  }

  override replaceEstimate(owner: string, body: SnapshotBody): void {
    if (body.blockSize !== BLOCK_SIZE) {
      throw new RangeError(`PeerIndex: block size ${body.blockSize} differs from ${BLOCK_SIZE}`);
    }
    const e = this.entryFor(owner);
    const made =
      body.keys.length === 0 ? { keys: EMPTY_KEYS, shared: true } : this.sets.ofBody(body, this.capOf(owner));
    e.keys = made.keys;
    e.shared = made.shared;
  }

  override applyDelta(owner: string, delta: SnapshotDelta): void {
    const e = this.entryFor(owner);
    const cap = this.capOf(owner);
    if (!e.shared) {
      applyDeltaTo(e.keys, delta, cap);
      return;
    }
    const made = this.sets.ofDelta(e.keys, delta, cap);
    e.keys = made.keys;
    e.shared = made.shared;
  }

  override removePeer(owner: string): void {
    const e = this.entries.get(owner);
    if (e === undefined) return;
    this.entries.delete(owner);
    this.slots[e.bit] = undefined;
    if (e.bit < this.lowFree) this.lowFree = e.bit;
    this.heldStale = true;
  }

  override updateTrieEstimate(owner: string, tokens: Tokens): void {
    const e = this.entries.get(owner);
    if (e === undefined) return;
    const cap = this.capOf(owner);
    const n = Math.floor(tokens.length / BLOCK_SIZE);
    const h = this.hash;
    h.reset();
    for (let b = 0; b < n && e.keys.size < cap; b++) {
      h.step(tokens, b * BLOCK_SIZE);
      if (e.shared) {
        if (e.keys.find(h.lo, h.hi) >= 0) continue;
        // This node's guess departs from the shared set: its own copy from here on.
        e.keys = e.keys.clone();
        e.shared = false;
      }
      e.keys.insert(h.lo, h.hi);
    }
  }

  override matchAll(tokens: Tokens): MatchAll {
    this.refreshHeld();
    const list = this.held;
    const out = this.lens;
    const n = Math.floor(tokens.length / BLOCK_SIZE);
    if (list.length === 0) return { owners: this.heldNames, lengths: out };
    if (this.los.length < n) {
      this.los = new Int32Array(n);
      this.his = new Int32Array(n);
    }
    const los = this.los;
    const his = this.his;
    // Blocks are hashed only as far as some owner still matches (as the merged walk does).
    let hashed = 0;
    const h = this.hash;
    h.reset();
    for (let i = 0; i < list.length; i++) {
      const keys = (list[i] as Entry).keys;
      let b = 0;
      for (; b < n; b++) {
        if (b === hashed) {
          h.step(tokens, b * BLOCK_SIZE);
          los[b] = h.lo;
          his[b] = h.hi;
          hashed++;
        }
        if (keys.find(los[b]!, his[b]!) < 0) break;
      }
      out[i] = b * BLOCK_SIZE;
    }
    return { owners: this.heldNames, lengths: out };
  }

  override match(owner: string, tokens: Tokens): number {
    const e = this.entries.get(owner);
    if (e === undefined) return 0;
    const n = Math.floor(tokens.length / BLOCK_SIZE);
    const h = this.hash;
    h.reset();
    let b = 0;
    for (; b < n; b++) {
      h.step(tokens, b * BLOCK_SIZE);
      if (e.keys.find(h.lo, h.hi) < 0) break;
    }
    return b * BLOCK_SIZE;
  }

  override estimateSize(owner: string): number {
    return (this.entries.get(owner)?.keys.size ?? 0) * BLOCK_SIZE;
  }

  override estimateKeys(owner: string): Float64Array {
    return this.entries.get(owner)?.keys.keys() ?? new Float64Array(0);
  }

  override owners(): string[] {
    this.refreshHeld();
    return [...this.heldNames];
  }

  override has(owner: string): boolean {
    return this.entries.has(owner);
  }

  /** Distinct keys over every owner (tests and benchmarks only: it builds a table per call). */
  override get keyCount(): number {
    const all = new KeyTable(0, 64);
    for (const e of this.entries.values())
      e.keys.forEach((lo, hi) => {
        all.insert(lo, hi);
      });
    return all.size;
  }

  override beginReplace(_owner: string, _body: SnapshotBody): void {
    throw new Error("SharedPeerIndex: no replacement in steps (estimateStepKeys must be 0)");
  }

  /** Distinct key-set objects this index holds (tests: sharing happened). */
  heldSets(): KeyTable[] {
    return [...this.entries.values()].map((e) => e.keys);
  }

  private entryFor(name: string): Entry {
    const found = this.entries.get(name);
    if (found !== undefined) return found;
    let bit = this.lowFree;
    while (bit < this.slots.length && this.slots[bit] !== undefined) bit++;
    if (bit >= this.slots.length) throw new RangeError(`PeerIndex: more than ${this.maxOwners} owners`);
    const e: Entry = { name, bit, keys: EMPTY_KEYS, shared: true };
    this.entries.set(name, e);
    this.slots[bit] = e;
    this.lowFree = bit + 1;
    this.heldStale = true;
    return e;
  }

  /** Owners in bit order, as `PeerIndex` lists them (routing reads them in this order). */
  private refreshHeld(): void {
    if (!this.heldStale) return;
    this.heldStale = false;
    this.held = this.slots.filter((e): e is Entry => e !== undefined);
    this.heldNames = Object.freeze(this.held.map((e) => e.name));
    this.lens = new Int32Array(this.held.length);
  }
}
