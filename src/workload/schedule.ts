/**
 * Request schedules over a pool of prompts grouped by subject (MMLU) or topic (synthetic).
 *
 * - uniform: a seeded random order of every item (the paper's schedule), each exactly once.
 * - hot-set skew (the paper's "80% of requests come from 20% of topics"): a seeded random 20% of the
 *   groups is hot; each request is hot with probability 0.8, then an item is drawn uniformly from
 *   the hot (or cold) items.
 * - Zipf(s) skew: groups ranked in a seeded random order, P(rank k) ∝ k^-s; then an item uniformly
 *   within the group.
 * Both skews come with and without repeated questions. With repeats, items are drawn with
 * replacement (default; this is our reading of the paper, whose routed skewed hit rate 91.4% exceeds
 * what shared prefixes alone allow, so some prompts must recur whole). Without repeats each item is
 * used at most once, which caps the request count (the hot items run out).
 *
 * Arrival: round-robin entry nodes; closed loop (the paper, one request at a time) or open-loop
 * Poisson arrivals at a given rate.
 */
import type { Prng } from "../core/prng.js";

export interface HotSetSkew {
  kind: "hot-set";
  /** Fraction of groups that are hot (paper: 0.2). */
  hotFraction: number;
  /** Fraction of requests drawn from hot groups (paper: 0.8). */
  hotShare: number;
  repeats: boolean;
}

export interface ZipfSkew {
  kind: "zipf";
  /** Zipf exponent s > 0. */
  s: number;
  repeats: boolean;
}

export type SkewOptions = HotSetSkew | ZipfSkew;

export const PAPER_SKEW: HotSetSkew = { kind: "hot-set", hotFraction: 0.2, hotShare: 0.8, repeats: true };

/** Default Zipf exponent (the classic Zipf law) when none is given. */
export const DEFAULT_ZIPF_S = 1;
/**
 * Largest Zipf exponent accepted: at s = 10 the second-ranked group already gets 0.1% of the
 * first's requests, so larger exponents only mean "one group"; the bound also keeps k^-s finite.
 */
export const MAX_ZIPF_S = 10;

/** Throws a RangeError unless `s` is a usable Zipf exponent: finite, in (0, MAX_ZIPF_S]. */
export function checkZipfExponent(s: number): number {
  if (!(Number.isFinite(s) && s > 0 && s <= MAX_ZIPF_S))
    throw new RangeError(`zipf exponent must be in (0, ${MAX_ZIPF_S}], got ${s}`);
  return s;
}

/** Zipf(s) shares of `ranks` groups: P(rank k) = k^-s / Σ j^-s, k = 1…ranks (index 0 = rank 1). */
export function zipfShares(ranks: number, s: number): number[] {
  checkZipfExponent(s);
  if (!(Number.isInteger(ranks) && ranks >= 1))
    throw new RangeError(`ranks must be a positive integer, got ${ranks}`);
  const w = Array.from({ length: ranks }, (_, k) => (k + 1) ** -s);
  const sum = w.reduce((a, b) => a + b, 0);
  return w.map((x) => x / sum);
}

/** Fills defaults: `true` means the paper's skew. */
export function resolveSkew(
  skew: boolean | (Partial<SkewOptions> & { kind?: SkewOptions["kind"] }) | undefined,
): SkewOptions | undefined {
  if (!skew) return undefined;
  if (skew === true) return { ...PAPER_SKEW };
  if (skew.kind === "zipf") {
    const s = checkZipfExponent((skew as Partial<ZipfSkew>).s ?? DEFAULT_ZIPF_S);
    return { kind: "zipf", s, repeats: skew.repeats ?? true };
  }
  const h = skew as Partial<HotSetSkew>;
  const hotFraction = h.hotFraction ?? PAPER_SKEW.hotFraction;
  const hotShare = h.hotShare ?? PAPER_SKEW.hotShare;
  if (!(hotFraction > 0 && hotFraction < 1))
    throw new RangeError(`hotFraction must be in (0, 1), got ${hotFraction}`);
  if (!(hotShare > 0 && hotShare < 1)) throw new RangeError(`hotShare must be in (0, 1), got ${hotShare}`);
  return { kind: "hot-set", hotFraction, hotShare, repeats: h.repeats ?? true };
}

/** Short human label, e.g. "hot-set 80/20 with repeats". */
export function describeSkew(s: SkewOptions | undefined): string {
  if (!s) return "uniform";
  const rep = s.repeats ? "with repeats" : "no repeats";
  if (s.kind === "zipf") return `zipf(s=${s.s}) ${rep}`;
  return `hot-set ${Math.round(s.hotShare * 100)}/${Math.round(s.hotFraction * 100)} ${rep}`;
}

/** How many of `groups` groups a hot-set skew makes hot: at least one, and never all. */
export function hotGroupCount(groups: number, skew: Pick<HotSetSkew, "hotFraction">): number {
  return Math.min(groups - 1, Math.max(1, Math.round(skew.hotFraction * groups)));
}

/** Items (global ids) grouped: `groups[g]` lists the ids of group g. */
export type Pool = readonly (readonly number[])[];

export interface Schedule {
  /** Item ids in request order (an id may recur when repeats are on). */
  order: number[];
  /** Group indices chosen as hot (hot-set) or in Zipf rank order (zipf); empty for uniform. */
  hotGroups: number[];
}

/** Every item once, in a seeded random order; more requests than items cycles through fresh shuffles. */
export function uniformSchedule(itemCount: number, rng: Prng, requests = itemCount): Schedule {
  const order: number[] = [];
  while (order.length < requests && itemCount > 0) {
    const perm = rng.shuffle(Array.from({ length: itemCount }, (_, i) => i));
    for (const id of perm) {
      if (order.length >= requests) break;
      order.push(id);
    }
  }
  return { order, hotGroups: [] };
}

export function skewedSchedule(pool: Pool, skew: SkewOptions, rng: Prng, requests?: number): Schedule {
  const nonEmpty = pool.map((g, i) => (g.length > 0 ? i : -1)).filter((i) => i >= 0);
  if (nonEmpty.length < 2) throw new RangeError("a skewed schedule needs at least 2 non-empty groups");
  return skew.kind === "hot-set"
    ? hotSetSchedule(pool, nonEmpty, skew, rng, requests)
    : zipfSchedule(pool, nonEmpty, skew, rng, requests);
}

function hotSetSchedule(
  pool: Pool,
  groups: number[],
  skew: HotSetSkew,
  rng: Prng,
  requests?: number,
): Schedule {
  const shuffled = rng.shuffle([...groups]);
  const hotCount = hotGroupCount(groups.length, skew);
  const hotGroups = shuffled.slice(0, hotCount).sort((a, b) => a - b);
  const hotSet = new Set(hotGroups);
  const hot = groups.filter((g) => hotSet.has(g)).flatMap((g) => [...pool[g]!]);
  const cold = groups.filter((g) => !hotSet.has(g)).flatMap((g) => [...pool[g]!]);
  const total = hot.length + cold.length;
  const order: number[] = [];
  if (skew.repeats) {
    const n = requests ?? total;
    for (let i = 0; i < n; i++) {
      const from = rng.next() < skew.hotShare ? hot : cold;
      order.push(from[rng.int(from.length)]!);
    }
    return { order, hotGroups };
  }
  // Without repeats: exact proportions, each item at most once.
  const max = Math.floor(Math.min(hot.length / skew.hotShare, cold.length / (1 - skew.hotShare)));
  const n = requests ?? max;
  if (n > max) {
    throw new RangeError(
      `a hot-set schedule without repeats holds at most ${max} requests here (the hot items run out); asked ${n}`,
    );
  }
  const nHot = Math.round(n * skew.hotShare);
  const picked = [...rng.shuffle(hot).slice(0, nHot), ...rng.shuffle(cold).slice(0, n - nHot)];
  return { order: rng.shuffle(picked), hotGroups };
}

function zipfSchedule(pool: Pool, groups: number[], skew: ZipfSkew, rng: Prng, requests?: number): Schedule {
  const ranked = rng.shuffle([...groups]);
  const weights = zipfShares(ranked.length, skew.s);
  const order: number[] = [];
  if (skew.repeats) {
    const total = groups.reduce((a, g) => a + pool[g]!.length, 0);
    const n = requests ?? total;
    const cdf = cumulative(weights);
    for (let i = 0; i < n; i++) {
      const g = pool[ranked[pick(cdf, rng.next())]!]!;
      order.push(g[rng.int(g.length)]!);
    }
    return { order, hotGroups: ranked };
  }
  // Without repeats: draw a group by weight among those with items left, take its next unused item.
  // Default length: the point where, in expectation, the first group would run out.
  const wsum = weights.reduce((a, b) => a + b, 0);
  const max = groups.reduce((a, g) => a + pool[g]!.length, 0);
  const natural = Math.floor(Math.min(...ranked.map((g, k) => pool[g]!.length / (weights[k]! / wsum))));
  const n = Math.min(requests ?? natural, max);
  if (requests !== undefined && requests > max) {
    throw new RangeError(`only ${max} distinct items exist; asked ${requests} requests without repeats`);
  }
  const remaining = ranked.map((g) => rng.shuffle([...pool[g]!]));
  const w = [...weights];
  let cdf = cumulative(w);
  for (let i = 0; i < n; i++) {
    const k = pick(cdf, rng.next());
    order.push(remaining[k]!.pop()!);
    if (remaining[k]!.length === 0) {
      w[k] = 0;
      cdf = cumulative(w);
    }
  }
  return { order, hotGroups: ranked };
}

function cumulative(w: readonly number[]): Float64Array {
  const c = new Float64Array(w.length);
  let s = 0;
  for (let i = 0; i < w.length; i++) {
    s += w[i]!;
    c[i] = s;
  }
  for (let i = 0; i < c.length; i++) c[i]! /= s;
  return c;
}

/** Index of the first cdf entry > u (binary search); never an index of zero weight. */
function pick(cdf: Float64Array, u: number): number {
  let lo = 0;
  let hi = cdf.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (cdf[mid]! > u) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/** Round-robin entry nodes, as the paper distributes requests. */
export function roundRobinEntries(count: number, nodes: number): number[] {
  if (!(Number.isInteger(nodes) && nodes >= 1))
    throw new RangeError(`nodes must be a positive integer, got ${nodes}`);
  return Array.from({ length: count }, (_, i) => i % nodes);
}

/** Open-loop Poisson arrival times (ms from start) at `ratePerSec` requests per second. */
export function poissonArrivals(count: number, ratePerSec: number, rng: Prng): number[] {
  if (!(ratePerSec > 0 && Number.isFinite(ratePerSec)))
    throw new RangeError(`rate must be > 0, got ${ratePerSec}`);
  const out: number[] = [];
  let t = 0;
  const meanGapMs = 1000 / ratePerSec;
  for (let i = 0; i < count; i++) {
    // 1 - u lies in (0, 1], so the log is finite.
    t += -Math.log(1 - rng.next()) * meanGapMs;
    out.push(t);
  }
  return out;
}
