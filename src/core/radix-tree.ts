/**
 * The paper's Trie_i: a node's exact, token-level view of its own KV cache.
 *
 * Edges hold token runs (Uint32Array); a node splits when an insert or lock stops inside an edge and
 * merges with its only child when a split stops mattering (after evictions, after an unlock). Recency
 * comes from an injected logical clock (`now`), never wall time.
 *
 * Capacity: `insert` never evicts. Algorithm 1 (lines 7-10) has the CALLER evict first
 * (`evict(n - free())`); an insert the caller lets through anyway is stored and `size` may then exceed
 * `capacity` (`free()` goes negative). `resetTo` mirrors an engine's report as-is, whatever its size.
 *
 * Alongside the tokens the tree keeps the chained block keys of its contents (block-hash.ts) and a
 * bounded change log of keys added/removed per version, so a snapshot body or a delta costs the size
 * of the answer, not a tree walk.
 */
import { BLOCK_SIZE, BlockHasher } from "./block-hash.js";
import type { EvictedRun, Tokens } from "./engine.js";
import { invariant } from "./invariant.js";
import type { SnapshotBody, SnapshotDelta } from "./snapshot.js";

class TreeNode {
  edge: Uint32Array;
  parent: TreeNode | null;
  children: Map<number, TreeNode> | null = null;
  lastAccess: number;
  /** Locks held on this node or below it: a node with lockCount > 0 is never evicted. */
  lockCount = 0;
  /** Set when the node leaves the tree (evicted, merged away), so stale references are recognisable. */
  detached = false;

  constructor(edge: Uint32Array, parent: TreeNode | null, lastAccess: number) {
    this.edge = edge;
    this.parent = parent;
    this.lastAccess = lastAccess;
  }
}

/** Opaque pin on a matched path; returned by `lock`, given back to `unlock` exactly once. */
export interface LockHandle {
  readonly length: number;
}

class Lock implements LockHandle {
  constructor(
    public node: TreeNode | null,
    readonly length: number,
  ) {}
}

interface LogEntry {
  version: number;
  added: number[];
  removed: number[];
}

const EMPTY_KEYS = new Float64Array(0);

export interface RadixTreeOptions {
  /** Capacity in tokens. */
  capacity: number;
  /** Most keys the change log keeps before it forgets old versions (then peers need a full snapshot). */
  logKeyLimit?: number;
  /** Most versions the change log keeps. */
  logVersionLimit?: number;
}

/** Bases whose delta to the current version is kept (holders at other bases get theirs built). */
const DELTA_CACHE_BASES = 32;

export class RadixTree {
  readonly capacity: number;
  private readonly root = new TreeNode(new Uint32Array(0), null, 0);
  private tokenCount = 0;
  private ver = 0;
  private readonly keys = new Set<number>();
  private readonly hasher = new BlockHasher();
  /** Keys changed by the operation in progress; committed as one version. */
  private pendingAdded: number[] = [];
  private pendingRemoved: number[] = [];
  private pendingChange = false;
  private log: LogEntry[] = [];
  private logHead = 0;
  private logKeys = 0;
  /** Oldest version `changesSince` can still answer from. */
  private logBase = 0;
  private readonly logKeyLimit: number;
  private readonly logVersionLimit: number;
  private bodyCache: { version: number; body: SnapshotBody } | undefined;
  /**
   * Deltas to this version already built, by base: gossip sends the same change to every holder at
   * the same base each round, and rebuilding it per holder was a large share of the simulator's
   * allocations. Dropped when the version moves; a few bases at most.
   */
  private deltaCache: { version: number; byBase: Map<number, SnapshotDelta> } | undefined;
  /**
   * LRU candidates, kept lazily: a leaf is pushed whenever it becomes a leaf or its recency changes,
   * and entries that no longer hold (recency moved, got children, locked, gone) are skipped on pop.
   * Eviction then costs the leaves it takes, not a walk of the whole tree.
   */
  private lru = new LeafHeap();
  /** Matched length of the last `descend`. */
  private walked = 0;
  private nodeCount = 1;
  /** Helper trees (resetTo's target) skip key tracking. */
  private readonly trackKeys: boolean;

  constructor(opts: RadixTreeOptions, trackKeys = true) {
    if (!(opts.capacity >= 0)) throw new RangeError(`RadixTree: capacity must be ≥ 0, got ${opts.capacity}`);
    this.capacity = opts.capacity;
    const blocks = Number.isFinite(opts.capacity) ? Math.ceil(opts.capacity / BLOCK_SIZE) : 1 << 19;
    this.logKeyLimit = opts.logKeyLimit ?? Math.max(1024, 2 * blocks);
    this.logVersionLimit = opts.logVersionLimit ?? 4096;
    this.trackKeys = trackKeys;
  }

  /** Tokens held (sum of edge lengths). */
  get size(): number {
    return this.tokenCount;
  }

  /** +1 on every change of content. */
  get version(): number {
    return this.ver;
  }

  free(): number {
    return this.capacity - this.tokenCount;
  }

  /** Longest cached prefix of `tokens`; no side effects. */
  match(tokens: Tokens): number {
    this.descend(tokens, false);
    return this.walked;
  }

  /** `match` + pin the matched path so eviction never takes it; refcounted, undo with `unlock`. */
  lock(tokens: Tokens): { length: number; handle: LockHandle } {
    // Pin exactly the matched tokens: split so the unmatched tail stays evictable.
    const node = this.descend(tokens, true);
    const length = this.walked;
    for (let n: TreeNode | null = node; n !== null; n = n.parent) n.lockCount++;
    return { length, handle: new Lock(node, length) };
  }

  unlock(handle: LockHandle): void {
    if (!(handle instanceof Lock) || handle.node === null) {
      throw new Error("RadixTree.unlock: handle is not a live lock of this tree");
    }
    const node = handle.node;
    handle.node = null;
    for (let n: TreeNode | null = node; n !== null; n = n.parent) {
      // a leaf whose last lock goes becomes an eviction candidate again
      if (--n.lockCount === 0 && n.children === null && n !== this.root && !n.detached) this.lru.push(n);
    }
    // A split made only for this lock is useless once the lock is gone.
    const only = this.onlyChild(node);
    if (only !== undefined && only.lastAccess === node.lastAccess) this.tryMerge(node);
  }

  /** Inserts `tokens` with recency `now` along the whole path; returns tokens newly added. */
  insert(tokens: Tokens, now: number): number {
    const added = this.insertInner(tokens, now);
    this.commit();
    return added;
  }

  /**
   * Removes least-recently-used unlocked leaves — only the tail of a leaf edge when that is enough —
   * until ≥ tokensNeeded are freed or nothing is evictable. Returns exactly what was removed.
   */
  evict(tokensNeeded: number): EvictedRun[] {
    const runs: EvictedRun[] = [];
    if (!(tokensNeeded > 0)) return runs;
    tokensNeeded = Math.ceil(tokensNeeded); // whole tokens only
    const heap = this.lru;
    let freed = 0;
    while (freed < tokensNeeded) {
      const entry = heap.pop();
      if (entry === undefined) break;
      const leaf = entry.node;
      if (leaf.detached || leaf.children !== null || leaf.lockCount > 0 || leaf.lastAccess !== entry.stamp)
        continue;
      const want = tokensNeeded - freed;
      const path = this.pathOf(leaf);
      const e = leaf.edge.length;
      if (e > want) {
        const keep = path.length - want;
        this.removeTail(leaf, path, keep);
        freed += want;
        runs.push({ path, keep });
        heap.push(leaf); // what is left of it is still the LRU leaf
      } else {
        const parent = leaf.parent!;
        this.removeTail(leaf, path, path.length - e);
        freed += e;
        runs.push({ path, keep: path.length - e });
        if (parent !== this.root) {
          if (parent.children === null) {
            if (parent.lockCount === 0) heap.push(parent);
          } else this.tryMerge(parent);
        }
      }
    }
    this.commit();
    return runs;
  }

  /**
   * Makes the tree hold exactly `sequences` (an engine-managed cache's full report). The change is
   * recorded as removals + inserts, so peers still get a delta, and recency of every listed sequence
   * becomes `now`. Locks are not honoured: the engine already decided.
   */
  resetTo(sequences: Tokens[], now: number): void {
    const target = new RadixTree({ capacity: Number.POSITIVE_INFINITY }, false);
    for (const s of sequences) target.insertInner(s, now);
    const work: TreeNode[] = [];
    this.forEachNode((n) => {
      if (n !== this.root && n.children === null) work.push(n);
    });
    while (work.length > 0) {
      const leaf = work.pop()!;
      if (leaf.detached || leaf.children !== null) continue;
      const path = this.pathOf(leaf);
      const m = target.match(path);
      if (m >= path.length) continue;
      const start = path.length - leaf.edge.length;
      const parent = leaf.parent!;
      this.removeTail(leaf, path, Math.max(m, start));
      if (m <= start && parent !== this.root) {
        if (parent.children === null) work.push(parent);
        else this.tryMerge(parent);
      }
    }
    for (const s of sequences) this.insertInner(s, now);
    this.rebuildLru();
    this.commit();
  }

  /** Every root-to-leaf path (reference / testing). */
  sequences(): Tokens[] {
    const out: Tokens[] = [];
    this.forEachNode((n) => {
      if (n !== this.root && n.children === null) out.push(this.pathOf(n));
    });
    return out;
  }

  /** The current contents as chained block keys; cached per version and never mutated. */
  snapshotBody(): SnapshotBody {
    if (this.bodyCache?.version !== this.ver) {
      const keys = new Float64Array(this.keys.size);
      let i = 0;
      for (const k of this.keys) keys[i++] = k;
      this.bodyCache = { version: this.ver, body: { blockSize: BLOCK_SIZE, keys } };
    }
    return this.bodyCache.body;
  }

  /** Netted changes from `version` to now; undefined when the log no longer reaches back that far. */
  changesSince(version: number): SnapshotDelta | undefined {
    if (!Number.isInteger(version) || version > this.ver || version < this.logBase) return undefined;
    if (version === this.ver) {
      return { baseVersion: version, version, added: EMPTY_KEYS, removed: EMPTY_KEYS };
    }
    if (this.deltaCache?.version !== this.ver) this.deltaCache = { version: this.ver, byBase: new Map() };
    const cached = this.deltaCache.byBase.get(version);
    if (cached !== undefined) return cached;
    const delta = this.buildDelta(version);
    if (this.deltaCache.byBase.size < DELTA_CACHE_BASES) this.deltaCache.byBase.set(version, delta);
    return delta;
  }

  /** The net change from `version` (in the log) to now. */
  private buildDelta(version: number): SnapshotDelta {
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
    return { baseVersion: version, version: this.ver, added, removed };
  }

  /** Number of distinct block keys held (= snapshot body length). */
  get blockCount(): number {
    return this.keys.size;
  }

  /**
   * The gossip summary's keys (gossip/summary.ts): for each distinct first block cached, the keys of
   * blocks 1, 2, 4, 8, … (1-based) of the path below it as far as that path does not branch, up to
   * `maxBlocks` blocks; at most `max` keys in all. A key at block b means a prefix of b whole blocks
   * is cached here. Costs the nodes above depth BLOCK_SIZE and one unbranched path per first block.
   */
  summaryKeys(max: number, maxBlocks: number): number[] {
    const out: number[] = [];
    // Each entry carries its own path so far (under one block: a few tokens).
    const stack: { node: TreeNode; path: Uint32Array }[] = [{ node: this.root, path: new Uint32Array(0) }];
    while (stack.length > 0 && out.length < max) {
      const { node, path } = stack.pop()!;
      if (node.children === null) continue;
      for (const c of node.children.values()) {
        if (out.length >= max) break;
        if (path.length + c.edge.length < BLOCK_SIZE) {
          const next = new Uint32Array(path.length + c.edge.length);
          next.set(path);
          next.set(c.edge, path.length);
          stack.push({ node: c, path: next });
        } else this.chainKeys(path, c, maxBlocks, max, out);
      }
    }
    return out;
  }

  /** summaryKeys' checkpoints along the unbranched path from `node` (whose parent's path is `prefix`). */
  private chainKeys(
    prefix: Uint32Array,
    node: TreeNode,
    maxBlocks: number,
    max: number,
    out: number[],
  ): void {
    const limit = maxBlocks * BLOCK_SIZE;
    const parts: Uint32Array[] = [prefix];
    let len = prefix.length;
    for (let n: TreeNode | undefined = node; n !== undefined; ) {
      parts.push(n.edge);
      len += n.edge.length;
      if (len >= limit || n.children === null || n.children.size !== 1) break;
      n = n.children.values().next().value;
    }
    const tokens = new Uint32Array(Math.min(len, limit));
    let at = 0;
    for (const p of parts) {
      const take = Math.min(p.length, tokens.length - at);
      tokens.set(p.subarray(0, take), at);
      at += take;
    }
    const hasher = new BlockHasher();
    const blocks = Math.floor(tokens.length / BLOCK_SIZE);
    for (let k = 0, next = 1; k < blocks && out.length < max; k++) {
      const key = hasher.next(tokens, k * BLOCK_SIZE);
      if (k + 1 !== next) continue;
      out.push(key);
      next *= 2;
    }
  }

  /** Locks held now (each one pins its path up to the root). */
  get locks(): number {
    return this.root.lockCount;
  }

  /**
   * Walks the whole tree and throws InvariantError on any inconsistency: links, lock counts, the
   * token count and (`withKeys`, which hashes every token) the block keys the snapshots are made of.
   * O(tree): tests and checked runs only.
   */
  checkIntegrity(withKeys = true): void {
    let tokens = 0;
    let nodes = 0;
    this.forEachNode((n) => {
      nodes++;
      invariant(!n.detached, "a detached node is still linked into the tree");
      if (n !== this.root) tokens += n.edge.length;
      if (n.children === null) return;
      invariant(n.children.size > 0, "an empty child map instead of none");
      let below = 0;
      for (const [first, c] of n.children) {
        invariant(c.parent === n && c.edge.length > 0 && c.edge[0] === first, "a child is misfiled");
        below += c.lockCount;
      }
      invariant(n.lockCount >= below, "a node holds fewer locks than its children");
    });
    invariant(tokens === this.tokenCount, () => `token count ${this.tokenCount}, edges hold ${tokens}`);
    invariant(nodes === this.nodeCount, () => `node count ${this.nodeCount}, the tree has ${nodes}`);
    if (!this.trackKeys || !withKeys) return;
    const keys = new Set<number>();
    const hasher = new BlockHasher();
    for (const seq of this.sequences()) {
      hasher.reset();
      for (let b = 0; (b + 1) * BLOCK_SIZE <= seq.length; b++) keys.add(hasher.next(seq, b * BLOCK_SIZE));
    }
    invariant(keys.size === this.keys.size, () => `${this.keys.size} block keys, the tree has ${keys.size}`);
    for (const k of keys) invariant(this.keys.has(k), "a cached block's key is missing");
  }

  // ---- internals ----

  /**
   * The one walk behind match, lock and insert: follows `tokens` from the root and returns the deepest
   * node reached; the matched length is left in `walked` (no allocation on the routing hot path). A
   * match ending inside an edge either stops at the edge's parent (`split` false) or splits the edge
   * there and returns the new node, whose path is then exactly the matched tokens. With `now`, every
   * node passed gets that recency (a split leaves the untouched tail its older one).
   */
  private descend(tokens: Tokens, split: boolean, now?: number): TreeNode {
    let node = this.root;
    let i = 0;
    const len = tokens.length;
    if (now !== undefined) node.lastAccess = now;
    while (i < len) {
      const child = node.children?.get(tokens[i]!);
      if (child === undefined) break;
      const e = child.edge;
      const lim = Math.min(e.length, len - i);
      let j = 1;
      while (j < lim && e[j] === tokens[i + j]) j++;
      i += j;
      if (j < e.length) {
        if (split) {
          node = this.split(child, j);
          if (now !== undefined) node.lastAccess = now;
        }
        break;
      }
      if (now !== undefined) child.lastAccess = now;
      node = child;
    }
    this.walked = i;
    return node;
  }

  private insertInner(tokens: Tokens, now: number): number {
    const len = tokens.length;
    const node = this.descend(tokens, true, now);
    const i = this.walked;
    if (i === len) {
      if (node.children === null && node !== this.root) {
        this.lru.push(node); // recency moved
        this.maybeCompactLru();
      }
      return 0;
    }
    const rest = tokens.slice(i);
    if (node !== this.root && node.children === null && node.lockCount === 0) {
      // Growing a leaf (e.g. a longer turn of the same conversation): extend rather than chain nodes.
      const grown = new Uint32Array(node.edge.length + rest.length);
      grown.set(node.edge);
      grown.set(rest, node.edge.length);
      node.edge = grown;
      this.lru.push(node);
    } else {
      const leaf = new TreeNode(rest, node, now);
      if (node.children === null) node.children = new Map();
      node.children.set(rest[0]!, leaf);
      this.nodeCount++;
      this.lru.push(leaf);
    }
    this.maybeCompactLru();
    this.tokenCount += len - i;
    this.pendingChange = true;
    if (this.trackKeys) this.addKeys(tokens, i, len);
    return len - i;
  }

  /** Splits `child`'s edge after `j` tokens; returns the new upper node (the child object stays below). */
  private split(child: TreeNode, j: number): TreeNode {
    const parent = child.parent!;
    const upper = new TreeNode(child.edge.subarray(0, j), parent, child.lastAccess);
    upper.lockCount = child.lockCount;
    parent.children!.set(child.edge[0]!, upper);
    child.edge = child.edge.subarray(j);
    child.parent = upper;
    upper.children = new Map([[child.edge[0]!, child]]);
    this.nodeCount++;
    return upper;
  }

  private onlyChild(node: TreeNode): TreeNode | undefined {
    if (node === this.root || node.detached || node.children === null || node.children.size !== 1) {
      return undefined;
    }
    return node.children.values().next().value;
  }

  /** Merges `node` into its only child when no lock tells them apart (handles always point below). */
  private tryMerge(node: TreeNode): void {
    const child = this.onlyChild(node);
    if (child === undefined || child.lockCount !== node.lockCount) return;
    const edge = new Uint32Array(node.edge.length + child.edge.length);
    edge.set(node.edge);
    edge.set(child.edge, node.edge.length);
    child.edge = edge;
    child.parent = node.parent;
    node.parent!.children!.set(edge[0]!, child);
    node.detached = true;
    node.children = null;
    this.nodeCount--;
  }

  /** Removes tokens [keep, path.length) of the leaf whose full path is `path`. */
  private removeTail(leaf: TreeNode, path: Tokens, keep: number): void {
    const start = path.length - leaf.edge.length;
    const removed = path.length - keep;
    if (keep > start) {
      leaf.edge = leaf.edge.slice(0, keep - start);
    } else {
      const parent = leaf.parent!;
      parent.children!.delete(leaf.edge[0]!);
      if (parent.children!.size === 0) parent.children = null;
      leaf.detached = true;
      this.nodeCount--;
    }
    this.tokenCount -= removed;
    this.pendingChange = true;
    if (this.trackKeys) this.removeKeys(path, keep);
  }

  /** Records keys of the blocks of `tokens` that end in (from, to]: the newly cached ones. */
  private addKeys(tokens: Tokens, from: number, to: number): void {
    const n = Math.floor(to / BLOCK_SIZE);
    if (n * BLOCK_SIZE <= from) return;
    this.hasher.reset();
    for (let k = 0; k < n; k++) {
      const key = this.hasher.next(tokens, k * BLOCK_SIZE);
      if ((k + 1) * BLOCK_SIZE > from) {
        this.keys.add(key);
        this.pendingAdded.push(key);
      }
    }
  }

  /** Forgets keys of the blocks of `path` that end after `keep`. */
  private removeKeys(path: Tokens, keep: number): void {
    const n = Math.floor(path.length / BLOCK_SIZE);
    if (n * BLOCK_SIZE <= keep) return;
    this.hasher.reset();
    for (let k = 0; k < n; k++) {
      const key = this.hasher.next(path, k * BLOCK_SIZE);
      if ((k + 1) * BLOCK_SIZE > keep) {
        this.keys.delete(key);
        this.pendingRemoved.push(key);
      }
    }
  }

  private commit(): void {
    if (!this.pendingChange) return;
    this.pendingChange = false;
    this.ver++;
    if (!this.trackKeys) return;
    this.log.push({ version: this.ver, added: this.pendingAdded, removed: this.pendingRemoved });
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

  private rebuildLru(): void {
    this.lru = new LeafHeap();
    this.forEachNode((n) => {
      if (n !== this.root && n.children === null && n.lockCount === 0) this.lru.push(n);
    });
  }

  /** Stale entries pile up as recency moves; rebuild once they outnumber the tree itself. */
  private maybeCompactLru(): void {
    if (this.lru.size > 2 * this.nodeCount + 1024) this.rebuildLru();
  }

  private pathOf(node: TreeNode): Uint32Array {
    let len = 0;
    for (let n: TreeNode | null = node; n !== null; n = n.parent) len += n.edge.length;
    const out = new Uint32Array(len);
    for (let n: TreeNode | null = node; n !== null; n = n.parent) {
      len -= n.edge.length;
      out.set(n.edge, len);
    }
    return out;
  }

  private forEachNode(fn: (n: TreeNode) => void): void {
    const stack: TreeNode[] = [this.root];
    while (stack.length > 0) {
      const n = stack.pop()!;
      fn(n);
      if (n.children !== null) for (const c of n.children.values()) stack.push(c);
    }
  }
}

/** Binary min-heap of (leaf, recency at push); ties by push order, so eviction is deterministic. */
class LeafHeap {
  private nodes: TreeNode[] = [];
  private stamps: number[] = [];
  private order: number[] = [];
  private seq = 0;
  private readonly out = { node: undefined as unknown as TreeNode, stamp: 0 };

  get size(): number {
    return this.nodes.length;
  }

  push(n: TreeNode): void {
    this.nodes.push(n);
    this.stamps.push(n.lastAccess);
    this.order.push(this.seq++);
    let i = this.nodes.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.less(i, p)) break;
      this.swap(i, p);
      i = p;
    }
  }

  /** Smallest entry; the returned object is reused by the next pop. */
  pop(): { node: TreeNode; stamp: number } | undefined {
    const n = this.nodes.length;
    if (n === 0) return undefined;
    this.out.node = this.nodes[0]!;
    this.out.stamp = this.stamps[0]!;
    this.swap(0, n - 1);
    this.nodes.pop();
    this.stamps.pop();
    this.order.pop();
    let i = 0;
    const m = n - 1;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= m) break;
      const r = l + 1;
      const c = r < m && this.less(r, l) ? r : l;
      if (!this.less(c, i)) break;
      this.swap(c, i);
      i = c;
    }
    return this.out;
  }

  private less(a: number, b: number): boolean {
    const x = this.stamps[a]!;
    const y = this.stamps[b]!;
    return x < y || (x === y && this.order[a]! < this.order[b]!);
  }

  private swap(a: number, b: number): void {
    const n = this.nodes[a]!;
    this.nodes[a] = this.nodes[b]!;
    this.nodes[b] = n;
    const s = this.stamps[a]!;
    this.stamps[a] = this.stamps[b]!;
    this.stamps[b] = s;
    const o = this.order[a]!;
    this.order[a] = this.order[b]!;
    this.order[b] = o;
  }
}
