/**
 * The PeerIndex's one walk over a request: hash its blocks in order, look each up in the merged table,
 * and end each owner's match at the first block whose bitset lacks it. Allocation-free.
 */
import { BLOCK_SIZE, type BlockHasher } from "./block-hash.js";
import type { Tokens } from "./engine.js";
import type { KeyTable } from "./key-table.js";

/**
 * Walks `tokens` for the owners whose bits are set in `active` (one word per 32 owners; `any` is their
 * OR) and sets lengths[pos[bit]] to each one's block-granular match. Uses `active` as scratch.
 */
export function walkMatches(
  tokens: Tokens,
  table: KeyTable,
  hasher: BlockHasher,
  active: Uint32Array,
  anyActive: number,
  pos: Int32Array,
  lengths: Int32Array,
): void {
  const W = active.length;
  let any = anyActive;
  const n = Math.floor(tokens.length / BLOCK_SIZE);
  let b = 0;
  if (any !== 0) {
    hasher.reset();
    for (; b < n; b++) {
      hasher.step(tokens, b * BLOCK_SIZE);
      const slot = table.find(hasher.lo, hasher.hi);
      const matched = b * BLOCK_SIZE;
      any = 0;
      if (slot < 0) {
        for (let w = 0; w < W; w++) {
          dropBits(active[w]!, w, matched, pos, lengths);
          active[w] = 0;
        }
        break;
      }
      const base = slot * table.stride + 2;
      const data = table.data;
      for (let w = 0; w < W; w++) {
        const a = active[w]!;
        const keep = a & data[base + w]!;
        if (a !== keep) dropBits(a & ~keep, w, matched, pos, lengths);
        active[w] = keep;
        any |= keep;
      }
      if (any === 0) break;
    }
  }
  if (b === n) {
    for (let w = 0; w < W; w++) dropBits(active[w]!, w, n * BLOCK_SIZE, pos, lengths);
  }
}

/** Sets lengths[] = `matched` for every owner bit set in `bits` (word `w`). */
function dropBits(bits: number, w: number, matched: number, pos: Int32Array, lengths: Int32Array): void {
  while (bits !== 0) {
    const low = bits & -bits;
    const bit = (w << 5) + (31 - Math.clz32(low));
    lengths[pos[bit]!] = matched;
    bits ^= low;
  }
}
