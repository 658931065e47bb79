/**
 * Scuttlebutt anti-entropy alone, in rounds (src/sim/gossip-rounds.ts: every node one push-pull with
 * `fanout` members per round, all legs delivered within it): the rounds one change of one owner needs
 * to reach 50 / 99 / 100 % of the nodes, apart from timing, at N the node simulator cannot reach.
 */
import { GossipRounds } from "../../sim/gossip-rounds.js";

export interface RoundsCell {
  nodes: number;
  /** Rounds after the change until ≥ 50 % / ≥ 99 % / all nodes held it (undefined: not within maxRounds). */
  p50?: number;
  p99?: number;
  p100?: number;
  maxRounds: number;
  /** Gossip bytes per node per round in the rounds measured. */
  bytesPerNodeRound: number;
  wallMs: number;
}

export function runRoundsCell(nodes: number, seed: number): RoundsCell {
  const t0 = performance.now();
  const g = new GossipRounds({ nodes, seed });
  for (let i = 0; i < nodes; i++) g.change(i);
  // Warm-up: every owner's first state spreads (log2 N rounds and a margin), as in a running cluster.
  const warm = Math.ceil(Math.log2(Math.max(2, nodes))) + 2;
  for (let r = 0; r < warm; r++) g.round();
  const owner = nodes > 1 ? 1 : 0;
  g.change(owner);
  const maxRounds = 4 * Math.ceil(Math.log2(Math.max(2, nodes)));
  const bytes0 = g.bytes;
  const out: RoundsCell = { nodes, maxRounds, bytesPerNodeRound: 0, wallMs: 0 };
  let r = 0;
  while (r < maxRounds) {
    r++;
    g.round();
    const share = g.holders(owner) / nodes;
    if (out.p50 === undefined && share >= 0.5) out.p50 = r;
    if (out.p99 === undefined && share >= 0.99) out.p99 = r;
    if (share >= 1) {
      out.p100 = r;
      break;
    }
  }
  out.bytesPerNodeRound = (g.bytes - bytes0) / nodes / r;
  out.wallMs = performance.now() - t0;
  return out;
}
