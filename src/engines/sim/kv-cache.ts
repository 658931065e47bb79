/**
 * The simulated engine's own KV cache contents: a plain compressed trie of token sequences,
 * deliberately independent of the node's RadixTree so "the node's tree equals the engine's cache"
 * is a real check. The engine decides nothing here (node-managed): it caches what it ran and frees
 * exactly the runs the node evicted.
 */
import type { EvictedRun, Tokens } from "../../core/engine.js";

interface KvNode {
  edge: Uint32Array;
  children: Map<number, KvNode> | null;
}

export class KvCache {
  private root: KvNode = { edge: new Uint32Array(0), children: null };
  private count = 0;

  get size(): number {
    return this.count;
  }

  clear(): void {
    this.root = { edge: new Uint32Array(0), children: null };
    this.count = 0;
  }

  /** Longest cached prefix of `tokens`. */
  match(tokens: Tokens): number {
    let node = this.root;
    let i = 0;
    const len = tokens.length;
    while (i < len) {
      const child = node.children?.get(tokens[i] as number);
      if (!child) return i;
      const e = child.edge;
      const lim = Math.min(e.length, len - i);
      let j = 0;
      while (j < lim && e[j] === tokens[i + j]) j++;
      i += j;
      if (j < e.length) return i;
      node = child;
    }
    return i;
  }

  /** Caches the sequence `tokens` (whole). */
  insert(tokens: Tokens): void {
    let node = this.root;
    let i = 0;
    const len = tokens.length;
    while (i < len) {
      const t = tokens[i] as number;
      node.children ??= new Map();
      const child = node.children.get(t);
      if (!child) {
        node.children.set(t, { edge: tokens.slice(i), children: null });
        this.count += len - i;
        return;
      }
      const e = child.edge;
      const lim = Math.min(e.length, len - i);
      let j = 0;
      while (j < lim && e[j] === tokens[i + j]) j++;
      if (j < e.length) {
        // Split the edge at j: child keeps the head, a new node takes the tail and the old children.
        const tail: KvNode = { edge: e.subarray(j), children: child.children };
        child.edge = e.subarray(0, j);
        child.children = new Map([[tail.edge[0] as number, tail]]);
      }
      i += j;
      node = child;
    }
  }

  /**
   * Frees tokens [keep, path.length) of `path`. The node only evicts leaf tails, so everything
   * below position `keep` on that path goes; returns how many tokens were freed.
   */
  remove(run: EvictedRun): number {
    const { path, keep } = run;
    let node = this.root;
    let i = 0;
    while (i <= keep) {
      const child = i < path.length ? node.children?.get(path[i] as number) : undefined;
      if (!child) return 0;
      const e = child.edge;
      if (i === keep) {
        node.children?.delete(path[i] as number);
        const freed = subtreeSize(child);
        this.count -= freed;
        return freed;
      }
      if (keep < i + e.length) {
        const o = keep - i;
        const freed = subtreeSize(child) - o;
        child.edge = e.subarray(0, o);
        child.children = null;
        this.count -= freed;
        return freed;
      }
      i += e.length;
      node = child;
    }
    return 0;
  }

  /** Every root-to-leaf sequence (checks and tests). */
  sequences(): Tokens[] {
    const out: Tokens[] = [];
    const walk = (n: KvNode, prefix: number[]): void => {
      const here = prefix.concat(Array.from(n.edge));
      if (!n.children || n.children.size === 0) {
        if (here.length > 0) out.push(Uint32Array.from(here));
        return;
      }
      for (const c of n.children.values()) walk(c, here);
    };
    walk(this.root, []);
    return out;
  }
}

function subtreeSize(n: KvNode): number {
  let s = n.edge.length;
  if (n.children) for (const c of n.children.values()) s += subtreeSize(c);
  return s;
}
