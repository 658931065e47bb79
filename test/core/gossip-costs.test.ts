/**
 * In gossip mode an owner's engine costs ride its own states' headers (`advertiseCosts`), relayed as
 * is: what a member believes of the owner's speed is what the newest applied header says, so a newer
 * header without costs clears the ones an older header carried.
 */
import { describe, expect, test } from "vitest";
import { stampCosts } from "../../src/core/node/engine-costs.js";
import type { GossipAntiEntropy } from "../../src/core/node/gossip-anti-entropy.js";
import type { Effect } from "../../src/core/node/types.js";
import { RadixTree } from "../../src/core/radix-tree.js";
import type { EngineCosts } from "../../src/core/snapshot.js";
import { gossiper, pushPull } from "./gossip-pair.js";

const COSTS: EngineCosts = { fixedMs: 12, msPerUncached: 0.25, msPerCached: 0.01, msPerOutput: 20 };

const prompt = (from: number) => Uint32Array.from({ length: 64 }, (_, i) => from + i);
const tree = () => new RadixTree({ capacity: 4096 });

/** A push-pull from A to B in which A's states carry `costs` (or none), as node.ts stamps them. */
function exchange(
  a: GossipAntiEntropy,
  b: GossipAntiEntropy,
  treeA: RadixTree,
  now: number,
  costs?: EngineCosts,
) {
  pushPull(a, b, treeA, tree(), now, [], (out: Effect[]) => {
    if (costs) stampCosts(out, costs, "A");
  });
}

/** A, whose tree holds `first`, advertising COSTS, and B once it learnt them from A's state. */
function advertised(first: number) {
  const a = gossiper("A", ["B"]);
  const b = gossiper("B", ["A"]);
  const treeA = tree();
  treeA.insert(prompt(first), 1);
  exchange(a, b, treeA, 10, COSTS);
  expect(b.load("A").costs).toEqual(COSTS);
  return { a, b, treeA };
}

describe("gossip mode: advertised engine costs", () => {
  test("a newer state of the owner without costs clears them; one with costs sets them again", () => {
    const { a, b, treeA } = advertised(1);
    // A changes and no longer advertises costs: the delta B applies says so.
    const before = b.held("A")?.version ?? 0;
    treeA.insert(prompt(1_000), 2);
    exchange(a, b, treeA, 20);
    expect(b.held("A")?.version).toBeGreaterThan(before);
    expect(b.load("A").costs).toBeUndefined();

    treeA.insert(prompt(2_000), 3);
    exchange(a, b, treeA, 30, COSTS);
    expect(b.load("A").costs).toEqual(COSTS);
  });

  test("an owner restarted without costs (a new epoch) is no longer scaled by its old ones", () => {
    const { a, b } = advertised(1);
    a.reset(2, ["B"], 8);
    const fresh = tree();
    fresh.insert(prompt(5_000), 1);
    exchange(a, b, fresh, 20);
    expect(b.held("A")?.epoch).toBe(2);
    expect(b.load("A").costs).toBeUndefined();
  });
});
