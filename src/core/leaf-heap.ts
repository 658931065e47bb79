/**
 * RadixTree's LRU candidates: a lazy min-heap of leaves. The tree pushes a leaf whenever it becomes a
 * leaf or its recency changes and skips entries that no longer hold on pop, so an eviction costs the
 * leaves it takes, not a walk of the whole tree.
 */
import type { TreeNode } from "./radix-node.js";

/** Binary min-heap of (leaf, recency at push); ties by push order, so eviction is deterministic. */
export class LeafHeap {
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
