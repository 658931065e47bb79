/**
 * Naive reference model for the tree and index tests: a cache is a list of sequences; its content is
 * the set of all their non-empty prefixes. Slow and obviously right.
 */
import fc from "fast-check";
import { BLOCK_SIZE, blockKeys } from "../../src/core/block-hash.js";
import type { Tokens } from "../../src/core/engine.js";

export const keyOf = (t: ArrayLike<number>, len = t.length): string => Array.from(t).slice(0, len).join(",");

export class RefCache {
  seqs: number[][] = [];

  insert(t: ArrayLike<number>): number {
    const before = this.prefixes().size;
    if (t.length > 0) this.seqs.push(Array.from(t));
    return this.prefixes().size - before;
  }

  match(t: ArrayLike<number>): number {
    let best = 0;
    for (const s of this.seqs) {
      let i = 0;
      while (i < s.length && i < t.length && s[i] === t[i]) i++;
      if (i > best) best = i;
    }
    return best;
  }

  /** Tokens [keep, len) of `path` removed: every sequence through path[0, keep+1) is cut to keep. */
  removeRun(path: ArrayLike<number>, keep: number): void {
    const p = Array.from(path).slice(0, keep + 1);
    this.seqs = this.seqs
      .map((s) => (s.length > keep && p.every((x, i) => s[i] === x) ? s.slice(0, keep) : s))
      .filter((s) => s.length > 0);
  }

  prefixes(): Set<string> {
    const out = new Set<string>();
    for (const s of this.seqs) for (let i = 1; i <= s.length; i++) out.add(keyOf(s, i));
    return out;
  }

  /** Maximal sequences (no other sequence extends them), as keys. */
  leaves(): Set<string> {
    const all = this.prefixes();
    const out = new Set<string>();
    for (const p of all) {
      let extended = false;
      for (const q of all) {
        if (q.length > p.length && q.startsWith(`${p},`)) {
          extended = true;
          break;
        }
      }
      if (!extended) out.add(p);
    }
    return out;
  }

  blockKeySet(): Set<number> {
    const out = new Set<number>();
    for (const s of this.seqs) for (const k of blockKeys(Uint32Array.from(s))) out.add(k);
    return out;
  }

  /** Block-granular match, as the peer index estimates it. */
  blockMatch(t: ArrayLike<number>): number {
    return Math.floor(this.match(t) / BLOCK_SIZE) * BLOCK_SIZE;
  }
}

/**
 * Sequences that share prefixes often (as prompts do): one of a few bases, cut, plus a short random
 * suffix over a tiny alphabet. Lengths cross several BLOCK_SIZE boundaries.
 */
const BASES: number[][] = [0, 1, 2].map((b) =>
  Array.from({ length: 48 }, (_, i) => (b * 7919 + i * 31) % 97),
);

export const arbSeq: fc.Arbitrary<Tokens> = fc
  .tuple(
    fc.integer({ min: 0, max: BASES.length }),
    fc.integer({ min: 0, max: 48 }),
    fc.array(fc.integer({ min: 0, max: 3 }), { maxLength: 24 }),
  )
  .map(([b, cut, suffix]) => Uint32Array.from([...(BASES[b] ?? []).slice(0, cut), ...suffix]));

export const setOf = (a: ArrayLike<number>): Set<number> => new Set(Array.from(a));

export function sameSet<T>(a: Set<T>, b: Set<T>): boolean {
  if (a.size !== b.size) return false;
  for (const x of a) if (!b.has(x)) return false;
  return true;
}
