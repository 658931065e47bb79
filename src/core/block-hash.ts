/**
 * Chained block hashes: the identity of a cached prefix on the wire and in the peer index.
 *
 * A prefix of length L is cut into floor(L / BLOCK_SIZE) full blocks; block k's key hashes block k's
 * tokens on top of the chain state left by blocks 0..k-1, so one key names one whole prefix (as in
 * vLLM / AIBrix / Dynamo). A set of keys therefore encodes a prefix tree without any structure, and a
 * request's match against it is "how many leading keys are present". Keys are 48-bit integers (exact
 * doubles: Map-friendly, 6 bytes on the wire). Collisions only cost a routing mistake, never output
 * correctness: estimates are advisory (paper §1).
 *
 * Two 32-bit murmur3-style lanes with different seeds run over the same tokens; the chain carries the
 * full 64-bit lane state, only the key is truncated to 48 bits.
 */
import type { Tokens } from "./engine.js";

/** Tokens per block. 16 is vLLM's default page size: fine enough for routing, ~0.4 wire bytes/token. */
export const BLOCK_SIZE = 16;

const SEED1 = 0x9747b28c;
const SEED2 = 0x5bd1e995;
const TWO32 = 4294967296;

/** MurmurHash3's 32-bit finalizer: mixes every input bit into every output bit (a signed int32). */
export function fmix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h | 0;
}

/**
 * Incremental chain hasher. Reused, never allocates per block: `reset()`, then `next(tokens, start)`
 * once per block in order; each call returns that block's key.
 */
export class BlockHasher {
  private s1 = SEED1;
  private s2 = SEED2;
  /** The last block's key as two parts (low 32 bits as int32, high 16 bits): lookups without boxing a double. */
  lo = 0;
  hi = 0;

  reset(): void {
    this.s1 = SEED1;
    this.s2 = SEED2;
  }

  /** Hashes tokens[start, start + BLOCK_SIZE) on top of the chain and returns its key; the block must be full. */
  next(tokens: Tokens, start: number): number {
    this.step(tokens, start);
    return this.hi * TWO32 + (this.lo >>> 0);
  }

  /** As `next`, leaving the key in `lo` / `hi` only. */
  step(tokens: Tokens, start: number): void {
    let h1 = this.s1;
    let h2 = this.s2;
    const end = start + BLOCK_SIZE;
    for (let i = start; i < end; i++) {
      const t = tokens[i]!;
      let k = Math.imul(t, 0xcc9e2d51);
      k = (k << 15) | (k >>> 17);
      k = Math.imul(k, 0x1b873593);
      h1 ^= k;
      h1 = (h1 << 13) | (h1 >>> 19);
      h1 = (Math.imul(h1, 5) + 0xe6546b64) | 0;
      let j = Math.imul(t ^ 0x6a09e667, 0x85ebca77);
      j = (j << 17) | (j >>> 15);
      j = Math.imul(j, 0xc2b2ae3d);
      h2 ^= j;
      h2 = (h2 << 11) | (h2 >>> 21);
      h2 = (Math.imul(h2, 9) + 0x27d4eb2f) | 0;
    }
    // Cross the lanes so the 48-bit key depends on both, and so the chain is not two independent hashes.
    const f1 = fmix(h1 ^ BLOCK_SIZE);
    const f2 = fmix(h2 ^ f1);
    this.s1 = f1;
    this.s2 = f2;
    this.lo = f1;
    this.hi = f2 & 0xffff;
  }
}

const shared = new BlockHasher();

/** Keys of every full block of `tokens[0, length)` (length defaults to all), in chain order. */
export function blockKeys(tokens: Tokens, length = tokens.length): number[] {
  const n = Math.floor(length / BLOCK_SIZE);
  const out = new Array<number>(n);
  shared.reset();
  for (let k = 0; k < n; k++) out[k] = shared.next(tokens, k * BLOCK_SIZE);
  return out;
}

/** Largest value a key can take (48 bits). */
export const MAX_BLOCK_KEY = 2 ** 48 - 1;
