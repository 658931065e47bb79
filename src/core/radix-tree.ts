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
 * Alongside the tokens the tree keeps the chained block keys of its contents and their change log
 * (block-key-log.ts); its nodes are radix-node.ts, its LRU leaf-heap.ts.
 */
import { BLOCK_SIZE } from "./block-hash.js";
import { BlockKeyLog } from "./block-key-log.js";
import type { EvictedRun, Tokens } from "./engine.js";
import { LeafHeap } from "./leaf-heap.js";
import { checkTree } from "./radix-integrity.js";
import { forEachNode, pathOf, TreeNode } from "./radix-node.js";
import { summaryKeys } from "./radix-summary.js";
import type { SnapshotBody, SnapshotDelta } from "./snapshot.js";

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

export interface RadixTreeOptions {
  /** Capacity in tokens. */
  capacity: number;
  /** Most keys the change log keeps before it forgets old versions (then peers need a full snapshot). */
  logKeyLimit?: number;
  /** Most versions the change log keeps. */
  logVersionLimit?: number;
}

export class RadixTree {
  readonly capacity: number;
  private readonly root = new TreeNode(new Uint32Array(0), null, 0);
  private tokenCount = 0;
  private ver = 0;
  /** Block keys of the contents and their change log (untouched in helper trees). */
  private readonly keyLog: BlockKeyLog;
  /** Set by a change in the operation in progress; committed as one version. */
  private pendingChange = false;
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
    this.keyLog = new BlockKeyLog(
      opts.logKeyLimit ?? Math.max(1024, 2 * blocks),
      opts.logVersionLimit ?? 4096,
    );
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
      const path = pathOf(leaf);
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
    forEachNode(this.root, (n) => {
      if (n !== this.root && n.children === null) work.push(n);
    });
    while (work.length > 0) {
      const leaf = work.pop()!;
      if (leaf.detached || leaf.children !== null) continue;
      const path = pathOf(leaf);
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
    forEachNode(this.root, (n) => {
      if (n !== this.root && n.children === null) out.push(pathOf(n));
    });
    return out;
  }

  /** The current contents as chained block keys; cached per version and never mutated. */
  snapshotBody(): SnapshotBody {
    return this.keyLog.snapshotBody(this.ver);
  }

  /** Netted changes from `version` to now; undefined when the log no longer reaches back that far. */
  changesSince(version: number): SnapshotDelta | undefined {
    return this.keyLog.changesSince(version, this.ver);
  }

  /** Number of distinct block keys held (= snapshot body length). */
  get blockCount(): number {
    return this.keyLog.size;
  }

  /** The gossip summary's keys (radix-summary.ts): checkpoints of each first block's unbranched path. */
  summaryKeys(max: number, maxBlocks: number): number[] {
    return summaryKeys(this.root, max, maxBlocks);
  }

  /** Locks held now (each one pins its path up to the root). */
  get locks(): number {
    return this.root.lockCount;
  }

  /** Throws InvariantError on any inconsistency (radix-integrity.ts); O(tree): tests and checked runs only. */
  checkIntegrity(withKeys = true): void {
    const keyLog = this.trackKeys && withKeys ? this.keyLog : undefined;
    checkTree(this.root, this.tokenCount, this.nodeCount, keyLog);
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
    if (this.trackKeys) this.keyLog.add(tokens, i, len);
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
    if (this.trackKeys) this.keyLog.remove(path, keep);
  }

  private commit(): void {
    if (!this.pendingChange) return;
    this.pendingChange = false;
    this.ver++;
    if (!this.trackKeys) return;
    this.keyLog.record(this.ver);
  }

  private rebuildLru(): void {
    this.lru = new LeafHeap();
    forEachNode(this.root, (n) => {
      if (n !== this.root && n.children === null && n.lockCount === 0) this.lru.push(n);
    });
  }

  /** Stale entries pile up as recency moves; rebuild once they outnumber the tree itself. */
  private maybeCompactLru(): void {
    if (this.lru.size > 2 * this.nodeCount + 1024) this.rebuildLru();
  }
}
