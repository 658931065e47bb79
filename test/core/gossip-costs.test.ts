/**
 * In gossip mode an owner's engine costs ride its own states' headers (`advertiseCosts`), relayed as
 * is: what a member believes of the owner's speed is what the newest applied header says, so a newer
 * header without costs clears the ones an older header carried.
 */
import { describe, expect, test } from "vitest";
import { resolveNodeConfig } from "../../src/core/node/config.js";
import { stampCosts } from "../../src/core/node/engine-costs.js";
import { GossipAntiEntropy } from "../../src/core/node/gossip-anti-entropy.js";
import type { Effect } from "../../src/core/node/types.js";
import { RadixTree } from "../../src/core/radix-tree.js";
import type { EngineCosts } from "../../src/core/snapshot.js";

const COSTS: EngineCosts = { fixedMs: 12, msPerUncached: 0.25, msPerCached: 0.01, msPerOutput: 20 };

function gossiper(id: string, peers: string[]) {
  const config = resolveNodeConfig({ id, peers, capacityTokens: 4096, gossip: "scuttlebutt" });
  const g = new GossipAntiEntropy(config, id, { now: () => 0, random: () => 0.5 });
  g.reset(1, peers, 8);
  return g;
}

/** A push-pull from A to B until quiet; A's messages carry `costs` as node.ts stamps them. */
function pushPull(
  a: GossipAntiEntropy,
  b: GossipAntiEntropy,
  treeA: RadixTree,
  treeB: RadixTree,
  now: number,
  costs: EngineCosts | undefined,
): void {
  const fromA = (out: Effect[]) => {
    if (costs) stampCosts(out, costs, "A");
    return out;
  };
  let toB: Effect[] = [];
  a.round(now, treeA, 0, 0, [{ id: "B", live: true, rttMs: 1 }], toB);
  fromA(toB);
  for (let i = 0; i < 4 && toB.length > 0; i++) {
    const toA: Effect[] = [];
    for (const e of toB)
      if (e.type === "mesh-send" && e.msg.channel === "gossip")
        b.onGossip("A", e.msg.msg, now, treeB, 0, 0, toA);
    toB = [];
    for (const e of toA)
      if (e.type === "mesh-send" && e.msg.channel === "gossip")
        a.onGossip("B", e.msg.msg, now, treeA, 0, 0, toB);
    fromA(toB);
  }
}

const prompt = (from: number) => Uint32Array.from({ length: 64 }, (_, i) => from + i);

describe("gossip mode: advertised engine costs", () => {
  test("a newer state of the owner without costs clears them; one with costs sets them again", () => {
    const a = gossiper("A", ["B"]);
    const b = gossiper("B", ["A"]);
    const treeA = new RadixTree({ capacity: 4096 });
    const treeB = new RadixTree({ capacity: 4096 });
    treeA.insert(prompt(1), 1);
    pushPull(a, b, treeA, treeB, 10, COSTS);
    expect(b.load("A").costs).toEqual(COSTS);

    // A changes and no longer advertises costs: the delta B applies says so.
    const before = b.held("A")?.version ?? 0;
    treeA.insert(prompt(1_000), 2);
    pushPull(a, b, treeA, treeB, 20, undefined);
    expect(b.held("A")?.version).toBeGreaterThan(before);
    expect(b.load("A").costs).toBeUndefined();

    treeA.insert(prompt(2_000), 3);
    pushPull(a, b, treeA, treeB, 30, COSTS);
    expect(b.load("A").costs).toEqual(COSTS);
  });

  test("an owner restarted without costs (a new epoch) is no longer scaled by its old ones", () => {
    const a = gossiper("A", ["B"]);
    const b = gossiper("B", ["A"]);
    const treeB = new RadixTree({ capacity: 4096 });
    const old = new RadixTree({ capacity: 4096 });
    old.insert(prompt(1), 1);
    pushPull(a, b, old, treeB, 10, COSTS);
    expect(b.load("A").costs).toEqual(COSTS);

    a.reset(2, ["B"], 8);
    const fresh = new RadixTree({ capacity: 4096 });
    fresh.insert(prompt(5_000), 1);
    pushPull(a, b, fresh, treeB, 20, undefined);
    expect(b.held("A")?.epoch).toBe(2);
    expect(b.load("A").costs).toBeUndefined();
  });
});
