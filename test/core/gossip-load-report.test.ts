/**
 * In gossip mode a state's header reports its owner's queue depth, as a snapshot does in the full mesh:
 * the origin's count of forwards sent since the last report must start over when one is applied.
 */
import { describe, expect, test } from "vitest";
import { resolveNodeConfig } from "../../src/core/node/config.js";
import { GossipAntiEntropy } from "../../src/core/node/gossip-anti-entropy.js";
import type { Effect } from "../../src/core/node/types.js";
import { RadixTree } from "../../src/core/radix-tree.js";

function gossiper(id: string, peers: string[]) {
  const config = resolveNodeConfig({ id, peers, capacityTokens: 4096, gossip: "scuttlebutt" });
  const g = new GossipAntiEntropy(config, id, { now: () => 0, random: () => 0.5 });
  g.reset(1, peers, 8);
  return g;
}

describe("gossip mode: load reports", () => {
  test("an applied state reports its owner once, and a drain empties the set", () => {
    const a = gossiper("A", ["B"]);
    const b = gossiper("B", ["A"]);
    const treeA = new RadixTree({ capacity: 4096 });
    treeA.insert(
      Uint32Array.from({ length: 64 }, (_, i) => i + 1),
      1,
    );
    const treeB = new RadixTree({ capacity: 4096 });
    const peer = (id: string) => [{ id, live: true, rttMs: 1 }];
    // A's digest to B, B's answer to A, A's states to B: a push-pull round until quiet.
    let toB: Effect[] = [];
    a.round(10, treeA, 3, 0, peer("B"), toB);
    for (let i = 0; i < 4 && toB.length > 0; i++) {
      const toA: Effect[] = [];
      for (const e of toB)
        if (e.type === "mesh-send" && e.msg.channel === "gossip")
          b.onGossip("A", e.msg.msg, 20, treeB, 0, 0, toA);
      toB = [];
      for (const e of toA)
        if (e.type === "mesh-send" && e.msg.channel === "gossip")
          a.onGossip("B", e.msg.msg, 30, treeA, 3, 0, toB);
    }
    expect(b.held("A")).toBeDefined();
    expect(b.load("A").queueDepth).toBe(3);
    expect(b.drainReported()).toEqual(["A"]);
    expect(b.drainReported()).toEqual([]);
  });
});
