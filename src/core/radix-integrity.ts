/** RadixTree's self-check for tests and checked runs. */
import { BLOCK_SIZE, BlockHasher } from "./block-hash.js";
import type { BlockKeyLog } from "./block-key-log.js";
import { invariant } from "./invariant.js";
import { forEachNode, pathOf, type TreeNode } from "./radix-node.js";

/**
 * Walks the whole tree and throws InvariantError on any inconsistency: links, lock counts, the
 * token count and (given `keyLog`, which hashes every token) the block keys the snapshots are made of.
 * O(tree): tests and checked runs only.
 */
export function checkTree(root: TreeNode, tokenCount: number, nodeCount: number, keyLog?: BlockKeyLog): void {
  let tokens = 0;
  let nodes = 0;
  forEachNode(root, (n) => {
    nodes++;
    invariant(!n.detached, "a detached node is still linked into the tree");
    if (n !== root) tokens += n.edge.length;
    if (n.children === null) return;
    invariant(n.children.size > 0, "an empty child map instead of none");
    let below = 0;
    for (const [first, c] of n.children) {
      invariant(c.parent === n && c.edge.length > 0 && c.edge[0] === first, "a child is misfiled");
      below += c.lockCount;
    }
    invariant(n.lockCount >= below, "a node holds fewer locks than its children");
  });
  invariant(tokens === tokenCount, () => `token count ${tokenCount}, edges hold ${tokens}`);
  invariant(nodes === nodeCount, () => `node count ${nodeCount}, the tree has ${nodes}`);
  if (keyLog === undefined) return;
  const keys = new Set<number>();
  const hasher = new BlockHasher();
  forEachNode(root, (n) => {
    if (n === root || n.children !== null) return;
    const seq = pathOf(n);
    hasher.reset();
    for (let b = 0; (b + 1) * BLOCK_SIZE <= seq.length; b++) keys.add(hasher.next(seq, b * BLOCK_SIZE));
  });
  invariant(keys.size === keyLog.size, () => `${keyLog.size} block keys, the tree has ${keys.size}`);
  for (const k of keys) invariant(keyLog.has(k), "a cached block's key is missing");
}
