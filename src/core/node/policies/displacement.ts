/**
 * What a bought duplicate costs the rest of the cluster while it lives (cost-aware's rent-or-buy).
 *
 * With caches smaller than the working set, buying a prefix a peer already holds puts a second copy
 * in our full cache: as many tokens of other prefixes leave it — `bought / victim` prefixes of the
 * typical length `victim`, and under pressure each may be the only copy anywhere, which our peers
 * rent from us. They stay out (re-bought, displacing the next) for as long as our duplicate lives,
 * and the buy's benefit is counted over that same lifetime: one round trip R per later arrival of
 * the prefix HERE (its expected reuse). Each displaced prefix is requested from each of the N − 1
 * peers about as often as ours is here (uniform demand across origins), and a peer that would have
 * rented it from us now recomputes it: G − R more, where G = msPerToken × victim is the prefill a hit
 * on it saves — nothing where R ≥ G, since that peer then holds its own copy anyway. Our own misses
 * on it are the one-off eviction charge the ranking already adds. So per arrival here the hole costs
 *
 *   pressure × (bought / victim) × (N − 1) × max(0, msPerToken × victim − R)
 *
 * and a buy pays only when loss ≤ reuse × (R − hole). A cache with room (pressure 0), or a round
 * trip dearer than recomputing the typical prefix (everyone then serves locally), leaves the rule
 * as it was: the hole is charged in what is evicted, not in what is bought — a long prefix bought
 * over a slow link still pays for itself when the prefixes it displaces are cheap to recompute.
 */

/**
 * The hole's cost per arrival of the prefix here, ms: `pressure` (share of insertions that evict,
 * 0–1), `nodes` the cluster's size as we see it (self included), `msPerToken` our prefill cost,
 * `boughtTokens` what the buy inserts, `victimTokens` the typical prefix it displaces, `rttMs` the
 * round trip to the peer holding the prefix.
 */
export function displacementMs(
  pressure: number,
  nodes: number,
  msPerToken: number,
  boughtTokens: number,
  victimTokens: number,
  rttMs: number,
): number {
  const p = Math.min(1, Math.max(0, pressure));
  if (p === 0 || nodes < 2 || !(boughtTokens > 0) || !(victimTokens > 0) || !(msPerToken > 0)) return 0;
  const perVictim = Math.max(0, msPerToken * victimTokens - Math.max(0, rttMs));
  return p * (boughtTokens / victimTokens) * (nodes - 1) * perVictim;
}
