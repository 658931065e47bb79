/**
 * The ideal hit: for each request, the longest prefix it shares with ANY request sent before it.
 * A single cache of unbounded size that saw every request would hit exactly that much, so no router
 * over any number of bounded caches can beat it. Computed with one unbounded radix tree.
 *
 * "Before" is the order requests were sent: the list order in closed loop, the arrival order in
 * open loop (for chat follow-ups, which are sent when their predecessor is answered, that order is
 * known only after a run: pass it as `order`).
 *
 * For a chat turn the bound includes its whole history (the previous turn is a prefix of it); the
 * history alone is what a router that always sends a turn where the conversation's previous turn
 * ran would hit (`historyHits`), so the gap between the two is what sharing across conversations
 * (a common start, the same first question) adds.
 */
import type { Tokens } from "../core/engine.js";
import { RadixTree } from "../core/radix-tree.js";

/** Per request (indexed as `requests`), the ideal hit in tokens; `order` = indices in sending order. */
export function idealHits(requests: readonly { tokens: Tokens }[], order?: ArrayLike<number>): Int32Array {
  if (order !== undefined && order.length !== requests.length)
    throw new RangeError(`order has ${order.length} entries for ${requests.length} requests`);
  // No key tracking: this tree never ships snapshots, it only measures.
  const tree = new RadixTree({ capacity: Number.POSITIVE_INFINITY }, false);
  const out = new Int32Array(requests.length);
  const seen = order === undefined ? undefined : new Uint8Array(requests.length);
  for (let k = 0; k < requests.length; k++) {
    const i = order === undefined ? k : order[k]!;
    if (seen) {
      if (!(i >= 0 && i < requests.length) || seen[i]) throw new RangeError("order must be a permutation");
      seen[i] = 1;
    }
    const r = requests[i]!;
    out[i] = tree.match(r.tokens);
    tree.insert(r.tokens, k);
  }
  return out;
}

/** Per request, the tokens of the request it follows (`after`: its conversation's previous turn); else 0. */
export function historyHits(
  requests: readonly { tokens: Tokens; after?: { request: number } }[],
): Int32Array {
  const out = new Int32Array(requests.length);
  requests.forEach((r, i) => {
    if (!r.after) return;
    const prev = requests[r.after.request];
    if (!prev || r.after.request >= i) throw new RangeError(`request ${i} follows no earlier request`);
    out[i] = prev.tokens.length;
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
