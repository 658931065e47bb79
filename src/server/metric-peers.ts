/**
 * Bounded per-peer metric labels. Every node labelling series by every member makes a scrape of all
 * N nodes hold N² series per metric: at a thousand nodes, millions. So at most `max` peers get series
 * of their own: a counter's peer keeps its label for good once given one (a series that came and went
 * would break `rate()`), later peers count under `other`; a gauge shows, each scrape, the members an
 * operator looks at first (not live, then those we hold an estimate of), and aggregate gauges count all.
 */
import { invariant } from "../core/invariant.js";

/** The label of the peers past the bound in per-peer counters. */
export const OTHER_PEERS = "other";
/** Peers with series of their own, by default: every member of a mesh of up to this many + 1 nodes. */
export const DEFAULT_METRIC_PEERS = 64;

export class CounterPeers {
  private readonly labelled = new Set<string>();

  constructor(readonly max: number) {
    invariant(Number.isInteger(max) && max >= 0, "metric peers: bad bound");
  }

  /** `id`'s label: its own while the bound has room or it already has one, else `other`. */
  label(id: string): string {
    if (this.labelled.has(id)) return id;
    if (this.labelled.size >= this.max) return OTHER_PEERS;
    this.labelled.add(id);
    return id;
  }
}

interface ShownPeer {
  suspected: boolean;
  /** Said goodbye (a planned stop): not live, yet no alert's concern. */
  left?: boolean;
  estimateTokens: number;
}

/**
 * The `max` peers a per-peer gauge shows: not live first (those that said goodbye last of them, so a
 * large scale-down does not push a crashed peer out of the alert's series), then those with an
 * estimate, then the rest.
 */
export function gaugePeers<P extends ShownPeer>(peers: readonly P[], max: number): readonly P[] {
  if (peers.length <= max) return peers;
  const rank = (p: P) => (p.suspected ? (p.left === true ? 1 : 0) : p.estimateTokens > 0 ? 2 : 3);
  // Stable: within a rank, the view's own order.
  return peers
    .map((p, i) => ({ p, i, r: rank(p) }))
    .sort((a, b) => a.r - b.r || a.i - b.i)
    .slice(0, max)
    .map((x) => x.p);
}
