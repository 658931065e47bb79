/**
 * Series per peer read from the cluster view at each scrape (metrics.ts registers them): what the
 * view shows of each peer, and the helper that turns it into a gauge per peer. At most
 * --metrics-max-peers peers, those not live first (metric-peers.ts `gaugePeers`). Gauges only: the
 * peers shown change between scrapes and a count read from a record can start over (its record
 * forgotten, or our cache reset), and a counter's series must neither come and go nor fall.
 */
import { Gauge, type Registry } from "prom-client";
import { gaugePeers } from "./metric-peers.js";

export interface PeerGaugeView {
  peer: string;
  suspected: boolean;
  /** Down or left (`suspected` is then true too). */
  down?: boolean;
  /** gossip "scuttlebutt": a former member that said goodbye (a planned stop), still remembered. */
  left?: boolean;
  /** Age of our estimate of this peer, seconds (undefined when none held yet). */
  estimateAgeSec?: number;
  estimateTokens: number;
  pushBackActive: boolean;
  /** Peer trust (trust.ts): score in [0, 1], and whether its breaker keeps forwards away. */
  trustScore?: number;
  breakerOpen?: boolean;
  /** Of its trust failures, those for answering past the first deadline (trust.ts `late`). */
  lateAnswers?: number;
}

type PeerValue = (p: PeerGaugeView) => number | undefined;

/**
 * The maker of gauges per peer over `peers` (undefined: no view to read yet), each rebuilt at each
 * scrape (peers come and go).
 */
export function perPeerGauges(
  registers: Registry[],
  peers: () => readonly PeerGaugeView[] | undefined,
  maxPeerSeries: number,
) {
  return (name: string, help: string, value: PeerValue): Gauge =>
    new Gauge({
      name,
      help,
      labelNames: ["peer"],
      registers,
      collect() {
        const all = peers();
        if (!all) return;
        this.reset();
        for (const p of gaugePeers(all, maxPeerSeries)) {
          const v = value(p); // undefined leaves the peer out
          if (v !== undefined) this.set({ peer: p.peer }, v);
        }
      },
    });
}

/**
 * Whether each peer is live, and of those not, which said goodbye: an alert on a peer not live
 * excludes `prefixmesh_peer_left` so a planned stop (scale-down, restart) does not set it off.
 */
export function peerLivenessGauges(perPeer: ReturnType<typeof perPeerGauges>): void {
  perPeer(
    "prefixmesh_peer_suspected",
    "1 while a peer is not live: suspected (silent), down (declared dead or left) or not heard from yet",
    (p) => (p.suspected ? 1 : 0),
  );
  perPeer(
    "prefixmesh_peer_left",
    "1 for a former member that said goodbye (stopped with SIGTERM: a planned scale-down or restart), " +
      "shown down while remembered (--gossip scuttlebutt); 0 otherwise, e.g. one declared dead",
    (p) => (p.left ? 1 : 0),
  );
}
