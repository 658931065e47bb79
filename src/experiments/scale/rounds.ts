/**
 * Scuttlebutt anti-entropy alone, in rounds (src/sim/gossip-rounds.ts: every node one push-pull with
 * `fanout` members per round, all legs delivered within it), at N the node simulator cannot reach:
 * bytes per node per round while every owner changes each round (the scale workload: 2 requests/s ×
 * Δpoll 500 ms), how many held estimates are then at their owner's version, and the rounds one change
 * of one owner needs to reach 50 / 99 / 100 % of the nodes holding that owner. With `maxEstimates`
 * the owners push to their holders (gossip/holders.ts), as nodes run it.
 */
import { GossipRounds } from "../../sim/gossip-rounds.js";
import type { MeshParts } from "../../sim/mesh-parts.js";
import { cpuMsSince } from "./cpu.js";

export interface RoundsCell {
  nodes: number;
  /** Owners held per node at most (undefined: all). */
  maxEstimates?: number;
  /** Rounds after the change until ≥ 50 % / ≥ 99 % / all of its holders held it (undefined: not within maxRounds). */
  p50?: number;
  p99?: number;
  p100?: number;
  maxRounds: number;
  /** Gossip bytes per node per round in the rounds measured for spread (one change in the cluster). */
  bytesPerNodeRound: number;
  /** Gossip bytes per node per round while every owner changes once a round. */
  busyBytesPerNodeRound: number;
  /** Share of the estimates held at their owner's current version after those busy rounds. */
  currentShare: number;
  /** With `parts`: the busy rounds' bytes by part (sim/mesh-parts.ts), all nodes, all busy rounds. */
  busyParts?: MeshParts;
  busyRounds: number;
  wallMs: number;
  /** Process CPU (user + system) of the run, ms. */
  cpuMs: number;
}

/** Busy rounds measured (after the warm-up). */
const BUSY_ROUNDS = 3;

export function runRoundsCell(nodes: number, seed: number, maxEstimates?: number, parts = false): RoundsCell {
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  const g = new GossipRounds({ nodes, seed, ...(maxEstimates === undefined ? {} : { maxEstimates }) });
  for (let i = 0; i < nodes; i++) g.change(i);
  // Warm-up: every owner's first state spreads (log2 N rounds and a margin), as in a running cluster.
  const log2 = Math.ceil(Math.log2(Math.max(2, nodes)));
  for (let r = 0; r < log2 + 2; r++) g.round();
  // Busy: every owner changes each round (one new prompt of 2 blocks).
  let bytes0 = g.bytes;
  const busyParts: MeshParts | undefined = parts ? {} : undefined;
  g.parts = busyParts;
  for (let r = 0; r < BUSY_ROUNDS; r++) {
    for (let i = 0; i < nodes; i++) g.change(i, 2);
    g.round();
  }
  g.parts = undefined;
  const busyBytesPerNodeRound = (g.bytes - bytes0) / nodes / BUSY_ROUNDS;
  let held = 0;
  let current = 0;
  for (let i = 0; i < nodes; i++) {
    const h = g.holding(i);
    held += h.held;
    current += h.current;
  }
  // Spread of one change of one owner, the rest quiet (their last changes still spreading).
  const owner = nodes > 1 ? 1 : 0;
  g.change(owner);
  const maxRounds = 4 * log2;
  bytes0 = g.bytes;
  const out: RoundsCell = {
    nodes,
    ...(maxEstimates === undefined ? {} : { maxEstimates }),
    maxRounds,
    bytesPerNodeRound: 0,
    busyBytesPerNodeRound,
    currentShare: held === 0 ? 1 : current / held,
    ...(busyParts ? { busyParts } : {}),
    busyRounds: BUSY_ROUNDS,
    wallMs: 0,
    cpuMs: 0,
  };
  let r = 0;
  while (r < maxRounds) {
    r++;
    g.round();
    const h = g.holding(owner);
    const share = (h.current + 1) / (h.held + 1);
    if (out.p50 === undefined && share >= 0.5) out.p50 = r;
    if (out.p99 === undefined && share >= 0.99) out.p99 = r;
    if (share >= 1) {
      out.p100 = r;
      break;
    }
  }
  out.bytesPerNodeRound = (g.bytes - bytes0) / nodes / r;
  out.wallMs = performance.now() - t0;
  out.cpuMs = cpuMsSince(cpu0);
  return out;
}
