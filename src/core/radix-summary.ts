/** The gossip summary's keys read off a RadixTree (gossip/summary.ts says what they are for). */
import { BLOCK_SIZE, BlockHasher } from "./block-hash.js";
import type { TreeNode } from "./radix-node.js";

/**
 * For each distinct first block cached under `root`, the keys of blocks 1, 2, 4, 8, … (1-based) of the
 * path below it as far as that path does not branch, up to `maxBlocks` blocks; at most `max` keys in
 * all. A key at block b means a prefix of b whole blocks is cached here. Costs the nodes above depth
 * BLOCK_SIZE and one unbranched path per first block.
 */
export function summaryKeys(root: TreeNode, max: number, maxBlocks: number): number[] {
  const out: number[] = [];
  // Each entry carries its own path so far (under one block: a few tokens).
  const stack: { node: TreeNode; path: Uint32Array }[] = [{ node: root, path: new Uint32Array(0) }];
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
      } else chainKeys(path, c, maxBlocks, max, out);
    }
  }
  return out;
}

/** summaryKeys' checkpoints along the unbranched path from `node` (whose parent's path is `prefix`). */
function chainKeys(prefix: Uint32Array, node: TreeNode, maxBlocks: number, max: number, out: number[]): void {
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
