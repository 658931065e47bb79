/**
 * A RadixTree's contents as chained block keys (block-hash.ts), with a bounded change log of keys
 * added/removed per version, so a snapshot body or a delta costs the size of the answer, not a tree
 * walk (paper §3.4: what anti-entropy ships).
 */
import { BLOCK_SIZE, BlockHasher } from "./block-hash.js";
import type { Tokens } from "./engine.js";
import type { SnapshotBody, SnapshotDelta } from "./snapshot.js";

interface LogEntry {
  version: number;
  added: number[];
  removed: number[];
}

const EMPTY_KEYS = new Float64Array(0);

/** Bases whose delta to the current version is kept (holders at other bases get theirs built). */
const DELTA_CACHE_BASES = 32;

export class BlockKeyLog {
  private readonly keys = new Set<number>();
  private readonly hasher = new BlockHasher();
  /** Keys changed by the operation in progress; recorded as one version. */
  private pendingAdded: number[] = [];
  private pendingRemoved: number[] = [];
  private log: LogEntry[] = [];
  private logHead = 0;
  private logKeys = 0;
  /** Oldest version `changesSince` can still answer from. */
  private logBase = 0;
  private bodyCache: { version: number; body: SnapshotBody } | undefined;
  /**
   * Deltas to this version already built, by base: gossip sends the same change to every holder at
   * the same base each round, and rebuilding it per holder was a large share of the simulator's
   * allocations. Dropped when the version moves; a few bases at most.
   */
  private deltaCache: { version: number; byBase: Map<number, SnapshotDelta> } | undefined;

  /**
   * @param logKeyLimit most keys the log keeps before it forgets old versions
   * @param logVersionLimit most versions the log keeps
   */
  constructor(
    private readonly logKeyLimit: number,
    private readonly logVersionLimit: number,
  ) {}

  /** Number of distinct block keys held (= snapshot body length). */
  get size(): number {
    return this.keys.size;
  }

  has(key: number): boolean {
    return this.keys.has(key);
  }

  /** Records keys of the blocks of `tokens` that end in (from, to]: the newly cached ones. */
  add(tokens: Tokens, from: number, to: number): void {
    this.blocksEndingIn(tokens, from, to, (key) => {
      this.keys.add(key);
      this.pendingAdded.push(key);
    });
  }

  /** Forgets keys of the blocks of `path` that end after `keep`. */
  remove(path: Tokens, keep: number): void {
    this.blocksEndingIn(path, keep, path.length, (key) => {
      this.keys.delete(key);
      this.pendingRemoved.push(key);
    });
  }

  /** Calls `fn` with the key of each whole block of `tokens` that ends in (from, to]. */
  private blocksEndingIn(tokens: Tokens, from: number, to: number, fn: (key: number) => void): void {
    const n = Math.floor(to / BLOCK_SIZE);
    if (n * BLOCK_SIZE <= from) return;
    // Keys chain from the first block: every block is hashed, only those past `from` are taken.
    this.hasher.reset();
    for (let k = 0; k < n; k++) {
      const key = this.hasher.next(tokens, k * BLOCK_SIZE);
      if ((k + 1) * BLOCK_SIZE > from) fn(key);
    }
  }

  /** Logs the pending changes as `version`, then forgets what is over the limits. */
  record(version: number): void {
    this.log.push({ version, added: this.pendingAdded, removed: this.pendingRemoved });
    this.logKeys += this.pendingAdded.length + this.pendingRemoved.length;
    this.pendingAdded = [];
    this.pendingRemoved = [];
    while (
      this.log.length - this.logHead > this.logVersionLimit ||
      (this.logKeys > this.logKeyLimit && this.log.length - this.logHead > 0)
    ) {
      const old = this.log[this.logHead++]!;
      this.logKeys -= old.added.length + old.removed.length;
      this.logBase = old.version;
    }
    if (this.logHead > 1024 && this.logHead * 2 > this.log.length) {
      this.log = this.log.slice(this.logHead);
      this.logHead = 0;
    }
  }

  /** The keys held at `version` (the current one); cached per version and never mutated. */
  snapshotBody(version: number): SnapshotBody {
    if (this.bodyCache?.version !== version) {
      const keys = new Float64Array(this.keys.size);
      let i = 0;
      for (const k of this.keys) keys[i++] = k;
      this.bodyCache = { version, body: { blockSize: BLOCK_SIZE, keys } };
    }
    return this.bodyCache.body;
  }

  /** Netted changes from `version` to `current`; undefined when the log no longer reaches back that far. */
  changesSince(version: number, current: number): SnapshotDelta | undefined {
    if (!Number.isInteger(version) || version > current || version < this.logBase) return undefined;
    if (version === current) {
      return { baseVersion: version, version, added: EMPTY_KEYS, removed: EMPTY_KEYS };
    }
    if (this.deltaCache?.version !== current) this.deltaCache = { version: current, byBase: new Map() };
    const cached = this.deltaCache.byBase.get(version);
    if (cached !== undefined) return cached;
    const delta = this.buildDelta(version, current);
    if (this.deltaCache.byBase.size < DELTA_CACHE_BASES) this.deltaCache.byBase.set(version, delta);
    return delta;
  }

  /** The net change from `version` (in the log) to `current`. */
  private buildDelta(version: number, current: number): SnapshotDelta {
    // +1: absent at base, present now; -1: present at base, absent now. Anything else cancels out.
    const net = new Map<number, number>();
    const first = this.logHead + (version - this.logBase);
    for (let i = first; i < this.log.length; i++) {
      const entry = this.log[i]!;
      for (const k of entry.removed) {
        if (net.get(k) === 1) net.delete(k);
        else net.set(k, -1);
      }
      for (const k of entry.added) {
        if (net.get(k) === -1) net.delete(k);
        else net.set(k, 1);
      }
    }
    let nAdded = 0;
    for (const v of net.values()) if (v === 1) nAdded++;
    const added = new Float64Array(nAdded);
    const removed = new Float64Array(net.size - nAdded);
    let a = 0;
    let r = 0;
    for (const [k, v] of net) {
      if (v === 1) added[a++] = k;
      else removed[r++] = k;
    }
    return { baseVersion: version, version: current, added, removed };
  }
}
