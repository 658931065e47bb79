/**
 * Prefix demand at this origin, for cost-aware routing's rent-or-buy choice. Forwarding to the peer
 * that holds a prefix "rents" it (one RTT per request); serving locally once "buys" it (one cold
 * prefill, then every later request here hits). Which is cheaper depends on how many more requests
 * HERE will reuse that prefix — so the origin counts arrivals per prefix (the chained block key of
 * the longest prefix any node holds) and learns the mean arrivals per prefix. A key that has now
 * arrived `seen` times is expected to come back max(seen / 2, mean − seen) more times: the rest of
 * the learned mean, or half its own history once that is longer (popular keys stay popular; half,
 * because the run may be nearer its end than its start) — so the first request of a prefix that is
 * typically reused many times already buys, with no hand-set horizon. Until counts exist the
 * config's `demandPrior` (pseudo-keys) stands in, leaning towards buying: serving locally.
 *
 * Bounded: at most `capacity` keys, least recently seen dropped first (their counts leave the mean).
 */
import { BLOCK_SIZE, BlockHasher } from "../block-hash.js";
import type { Tokens } from "../engine.js";
import type { Candidate } from "./policies/policy.js";

export class PrefixDemand {
  /** key → arrivals; Map order = recency (re-inserted on every arrival). */
  private readonly counts = new Map<number, number>();
  private arrivals = 0;
  /** Σ count² over tracked keys: Σc²/Σc is the arrival-weighted mean count. */
  private sumSq = 0;
  private readonly hasher = new BlockHasher();

  constructor(
    private readonly capacity: number,
    private readonly prior: { meanReuse: number; weight: number } = { meanReuse: 0, weight: 0 },
  ) {}

  /**
   * One request arrived: counts it against the longest prefix any candidate holds (block-aligned,
   * keyed by its chained block key) and returns how often that prefix is expected to come back here,
   * discounted by the eviction `pressure` of buying it (undefined: no prefix worth buying).
   */
  arrive(tokens: Tokens, candidates: readonly Candidate[], pressure: number, offset = 0): number | undefined {
    let best = 0;
    let own = 0;
    for (const c of candidates) {
      if (c.estimatedMatch > best) best = c.estimatedMatch;
      if (c.self) own = c.estimatedMatch;
    }
    // Only a prefix we mostly LACK is worth buying. When we hold most of it, the peer's extra is a
    // one-off tail (e.g. a repeated question after a shared prefix), whose reuse the prefixes'
    // learned mean would wildly overstate: then plain expected latency decides.
    if (best - own <= best / 2) return undefined;
    // `offset`: `tokens` is a namespaced cache key, whose first `offset` tokens are its pseudo-block.
    const blocks = Math.floor((Math.min(best, tokens.length - offset) + offset) / BLOCK_SIZE);
    if (blocks === 0) return undefined;
    this.hasher.reset();
    let key = 0;
    for (let b = 0; b < blocks; b++) key = this.hasher.next(tokens, b * BLOCK_SIZE);
    const seen = this.record(key) + 1;
    return this.expectedFuture(seen) * (1 - pressure);
  }

  /** Records one arrival of `key`; returns how many arrivals of it were seen before this one. */
  record(key: number): number {
    const before = this.counts.get(key) ?? 0;
    if (before > 0) this.counts.delete(key);
    this.counts.set(key, before + 1);
    this.arrivals++;
    this.sumSq += 2 * before + 1;
    if (this.counts.size > this.capacity) {
      const [oldKey, oldCount] = this.counts.entries().next().value as [number, number];
      this.counts.delete(oldKey);
      this.arrivals -= oldCount;
      this.sumSq -= oldCount * oldCount;
    }
    return before;
  }

  /**
   * Arrival-weighted mean arrivals per key (Σc² / Σc: the count of the key a random arrival has),
   * with the prior as `weight` pseudo-keys of `meanReuse` arrivals each. Weighting by arrivals keeps
   * one-off keys (two prompts sharing a passage) from dragging down the reuse of real prefixes.
   */
  meanArrivals(): number {
    const w = this.prior.weight;
    const m = this.prior.meanReuse;
    const d = this.arrivals + w * m;
    return d === 0 ? 0 : (this.sumSq + w * m * m) / d;
  }

  /** Expected further arrivals of a key whose arrival count, this one included, is `seen`. */
  expectedFuture(seen: number): number {
    return Math.max(seen / 2, this.meanArrivals() - seen);
  }

  get size(): number {
    return this.counts.size;
  }
}
