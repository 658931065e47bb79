/**
 * The ideal hit: for each request in order, the longest prefix it shares with ANY earlier request.
 * A single cache of unbounded size that saw every request would hit exactly that much, so no router
 * over any number of bounded caches can beat it. Computed with one unbounded radix tree.
 */
import type { Tokens } from "../core/engine.js";
import { RadixTree } from "../core/radix-tree.js";

/** Per request, the ideal hit in tokens. */
export function idealHits(requests: readonly { tokens: Tokens }[]): Int32Array {
  // No key tracking: this tree never ships snapshots, it only measures.
  const tree = new RadixTree({ capacity: Number.POSITIVE_INFINITY }, false);
  const out = new Int32Array(requests.length);
  requests.forEach((r, i) => {
    out[i] = tree.match(r.tokens);
    tree.insert(r.tokens, i);
  });
  return out;
}

/** Token-weighted hit rate (hit tokens / prompt tokens), the paper's cache-hit measure. */
export function hitRate(requests: readonly { tokens: Tokens }[], hits: ArrayLike<number>): number {
  let hit = 0;
  let total = 0;
  for (let i = 0; i < requests.length; i++) {
    hit += hits[i]!;
    total += requests[i]!.tokens.length;
  }
  return total === 0 ? 0 : hit / total;
}
