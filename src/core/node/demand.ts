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
 * Under eviction pressure a bought prefix helps only while it stays cached. LRU keeps a key whose
 * arrivals come within the cache's turnover (Che's approximation): of a key that is a share p of the
 * arrivals here, the next arrival finds it still cached with probability
 * s = 1 − pressure × exp(−p × turnover runs), and a buy is worth the chain of hits s + s² + … over
 * its expected arrivals (`Reuse.surviving`). The flat discount (`Reuse.flat`, × (1 − pressure))
 * stops a full cache from ever buying even its most frequent prefixes, which then pay a round trip
 * on every request.
 *
 * Bounded: at most `capacity` keys, least recently seen dropped first (their counts leave the mean).
 */
import { BLOCK_SIZE, BlockHasher } from "../block-hash.js";
import type { Tokens } from "../engine.js";
import type { Candidate } from "./policies/policy.js";

/** Our cache's churn (executor/run-cache.ts): the share of insertions that evict, and runs per full turnover. */
export interface Eviction {
  pressure: number;
  turnoverRuns?: number;
}

/** How often a prefix is expected to come back here, discounted for eviction two ways (header). */
export interface Reuse {
  /** Expected further arrivals × (1 − pressure). */
  flat: number;
  /** Expected hits a buy gives before the prefix is evicted (the survival chain). */
  surviving: number;
  /** Running mean length (tokens) of the longest prefix held anywhere, over arrivals with one. */
  prefixTokens: number;
}

/** Arrivals the running mean prefix length averages over (at most). */
const PREFIX_MEAN_ARRIVALS = 64;

export class PrefixDemand {
  /** key → arrivals; Map order = recency (re-inserted on every arrival). */
  private readonly counts = new Map<number, number>();
  private arrivals = 0;
  /** Σ count² over tracked keys: Σc²/Σc is the arrival-weighted mean count. */
  private sumSq = 0;
  /** Every request routed here, buyable or not: a key's share of them is its arrival rate. */
  private routed = 0;
  private readonly hasher = new BlockHasher();
  private prefixMean = 0;
  private prefixSeen = 0;

  constructor(
    private readonly capacity: number,
    private readonly prior: { meanReuse: number; weight: number } = { meanReuse: 0, weight: 0 },
  ) {}

  /**
   * One request arrived: counts it against the longest prefix any candidate holds (block-aligned,
   * keyed by its chained block key) and returns how often that prefix is expected to come back here,
   * discounted for eviction (undefined: no prefix worth buying).
   */
  arrive(
    tokens: Tokens,
    candidates: readonly Candidate[],
    eviction: Eviction,
    offset = 0,
  ): Reuse | undefined {
    this.routed++;
    let best = 0;
    let own = 0;
    for (const c of candidates) {
      if (c.estimatedMatch > best) best = c.estimatedMatch;
      if (c.self) own = c.estimatedMatch;
    }
    if (best > 0) {
      this.prefixSeen = Math.min(PREFIX_MEAN_ARRIVALS, this.prefixSeen + 1);
      this.prefixMean += (best - this.prefixMean) / this.prefixSeen;
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
    const future = this.expectedFuture(seen);
    return {
      flat: future * (1 - eviction.pressure),
      surviving: hitChain(future, survival(eviction, seen / this.routed)),
      prefixTokens: this.prefixMean,
    };
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

/**
 * The chance a prefix bought now is still cached at its next arrival, for a key that is `share` of
 * the arrivals (see the header). Without a measured turnover, the flat 1 − pressure.
 */
export function survival(e: Eviction, share: number): number {
  const p = Math.min(1, Math.max(0, e.pressure));
  if (p === 0) return 1;
  if (e.turnoverRuns === undefined || !(share > 0)) return 1 - p;
  return 1 - p * Math.exp(-share * e.turnoverRuns);
}

/** Expected hits from buying: s + s² + … + s^future (`future` arrivals, each surviving with s). */
export function hitChain(future: number, s: number): number {
  if (!(future > 0)) return 0;
  if (s >= 1) return future;
  if (!(s > 0)) return 0;
  return (s * (1 - s ** future)) / (1 - s);
}
