/** A RadixTree node and the walks over nodes that the tree's parts share. */

export class TreeNode {
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

/** The tokens from the root down to the end of `node`'s edge. */
export function pathOf(node: TreeNode): Uint32Array {
  let len = 0;
  for (let n: TreeNode | null = node; n !== null; n = n.parent) len += n.edge.length;
  const out = new Uint32Array(len);
  for (let n: TreeNode | null = node; n !== null; n = n.parent) {
    len -= n.edge.length;
    out.set(n.edge, len);
  }
  return out;
}

export function forEachNode(root: TreeNode, fn: (n: TreeNode) => void): void {
  const stack: TreeNode[] = [root];
  while (stack.length > 0) {
    const n = stack.pop()!;
    fn(n);
    if (n.children !== null) for (const c of n.children.values()) stack.push(c);
  }
}
