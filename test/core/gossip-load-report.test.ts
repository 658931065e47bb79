/**
 * In gossip mode a state's header reports its owner's queue depth, as a snapshot does in the full mesh:
 * the origin's count of forwards sent since the last report must start over when one is applied.
 */
import { describe, expect, test } from "vitest";
import type { Effect } from "../../src/core/node/types.js";
import { RadixTree } from "../../src/core/radix-tree.js";
import { gossiper, pushPull } from "./gossip-pair.js";

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

  test("the cap a member's hello advertised holds across our restart and its death", () => {
    const a = gossiper("A", ["B"]);
    const b = gossiper("B", ["A"]);
    const treeA = new RadixTree({ capacity: 4096 });
    treeA.insert(
      Uint32Array.from({ length: 40 * 16 }, (_, i) => i + 1),
      1,
    );
    const treeB = new RadixTree({ capacity: 4096 });
    b.capPeer("A", 10 * 16);
    pushPull(a, b, treeA, treeB, 10);
    expect(b.index.estimateSize("A")).toBe(10 * 16);
    // We restart: a new index, the member list learned anew.
    b.reset(2, [], 8);
    b.add("A");
    pushPull(a, b, treeA, treeB, 20);
    expect(b.held("A")).toBeDefined();
    expect(b.index.estimateSize("A")).toBe(10 * 16);
    // A is declared dead and comes back (no new hello): still capped.
    b.remove("A");
    b.add("A");
    pushPull(a, b, treeA, treeB, 30);
    expect(b.index.estimateSize("A")).toBe(10 * 16);
  });

  test("a large key set applies in steps, one timer each, and is not asked for again meanwhile", () => {
    const a = gossiper("A", ["B"]);
    const b = gossiper("B", ["A"], 8);
    const treeA = new RadixTree({ capacity: 4096 });
    treeA.insert(
      Uint32Array.from({ length: 40 * 16 }, (_, i) => i + 1),
      1,
    );
    const treeB = new RadixTree({ capacity: 4096 });
    const atB: Effect[] = [];
    pushPull(a, b, treeA, treeB, 10, atB);
    const timer = (es: Effect[]) => es.some((e) => e.type === "set-timer" && e.timer.kind === "estimates");
    expect(timer(atB)).toBe(true);
    // Not in yet: its epoch's empty version; a second exchange does not send the whole set again.
    expect(b.held("A")?.version).toBe(0);
    expect(b.counters.snapshotsReceived.deferred).toBe(1);
    const fulls = a.counters.snapshotsSent.full;
    pushPull(a, b, treeA, treeB, 20);
    expect(a.counters.snapshotsSent.full).toBe(fulls);
    let steps = 0;
    for (
      let out: Effect[] = [{ type: "set-timer", timer: { kind: "estimates" }, delayMs: 0 }];
      timer(out);
      steps++
    ) {
      out = [];
      b.onStepTimer(30, out);
    }
    expect(steps).toBeGreaterThan(2);
    expect(b.held("A")?.version).toBe(treeA.version);
    expect(b.index.estimateSize("A")).toBe(40 * 16);
    expect(b.load("A").treeTokens).toBe(40 * 16);
  });
});
