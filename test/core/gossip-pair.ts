/** Two GossipAntiEntropy members, A and B, and a push-pull between them, for the gossip tests. */
import { resolveNodeConfig } from "../../src/core/node/config.js";
import { GossipAntiEntropy } from "../../src/core/node/gossip-anti-entropy.js";
import type { Effect } from "../../src/core/node/types.js";
import type { RadixTree } from "../../src/core/radix-tree.js";
import { varintSize, writeVarint } from "../../src/core/varint.js";

export function gossiper(id: string, peers: string[], estimateStepKeys = 0): GossipAntiEntropy {
  const config = resolveNodeConfig({
    id,
    peers,
    capacityTokens: 4096,
    gossip: "scuttlebutt",
    estimateStepKeys,
  });
  const g = new GossipAntiEntropy(config, id, { now: () => 0, random: () => 0.5 });
  g.reset(1, peers, 8);
  return g;
}

/**
 * A's digest to B, B's answer, A's states: a push-pull until quiet (A starts). `atB`: what B sent;
 * `fromA`: applied to each batch A sends before B gets it (as node.ts stamps its effects).
 */
export function pushPull(
  a: GossipAntiEntropy,
  b: GossipAntiEntropy,
  treeA: RadixTree,
  treeB: RadixTree,
  now: number,
  atB: Effect[] = [],
  fromA: (out: Effect[]) => void = () => {},
): void {
  let toB: Effect[] = [];
  a.round(now, treeA, 0, 0, [{ id: "B", live: true, rttMs: 1 }], toB);
  fromA(toB);
  for (let i = 0; i < 4 && toB.length > 0; i++) {
    const toA: Effect[] = [];
    for (const e of toB)
      if (e.type === "mesh-send" && e.msg.channel === "gossip")
        b.onGossip("A", e.msg.msg, now, treeB, 0, 0, toA);
    atB.push(...toA);
    toB = [];
    for (const e of toA)
      if (e.type === "mesh-send" && e.msg.channel === "gossip")
        a.onGossip("B", e.msg.msg, now, treeA, 0, 0, toB);
    fromA(toB);
  }
}

/** `v` as the codecs write it (src/core/varint.ts), for hand-made frames. */
export function varint(v: number): number[] {
  const buf = new Uint8Array(varintSize(v));
  writeVarint(buf, 0, v);
  return [...buf];
}
