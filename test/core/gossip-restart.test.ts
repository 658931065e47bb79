/**
 * Under gossip "scuttlebutt" a member that crashed and came back within its SWIM suspicion time is
 * never reported down; its new epoch, in the digests and states gossip carries, is what shows the
 * restart. It then takes the full mesh's path: what we forwarded it fails over at once, and a hedge
 * on it ends (asking it again would run the job a second time: its duplicate window is gone).
 */
import { describe, expect, it } from "vitest";
import type { GossipMessage } from "../../src/core/node/gossip/scuttlebutt.js";
import type { Effect } from "../../src/core/node/types.js";
import { RadixTree } from "../../src/core/radix-tree.js";
import { gossiper } from "./gossip-pair.js";
import {
  answerLost,
  daemonGossip,
  type Harness,
  isType,
  type Mail,
  prompt,
  untilFallback,
} from "./node-harness.js";

const ACK_MS = 250;

/** A and B as the daemon runs them (scuttlebutt, answer recovery); B holds topic 1. */
function setup(): Harness {
  const h = daemonGossip(["A", "B"], ACK_MS);
  expect(h.node("A").heldOf("B")).toBeDefined();
  return h;
}

const toB = (m: Mail) => m.msg.type === "forward" && m.to === "B";

/** B crashes and restarts at once: SWIM never suspects it; its greeting digest carries its new epoch. */
function quickRestart(h: Harness): void {
  h.crash("B");
  h.advance(10);
  h.restart("B");
  h.deliverMesh();
}

describe("gossip mode: a member back in a new epoch within its suspicion time", () => {
  it("a forward it acked before the crash fails over at once, not at its timeouts", () => {
    const h = setup();
    h.client("A", "r1", prompt(1, 1));
    expect(h.mailbox.filter(toB)).toHaveLength(1);
    h.deliver(isType("forward"));
    h.deliver(isType("forward-ack"));
    quickRestart(h);
    expect(h.node("A").livenessOf("B")).toBe("live"); // SWIM saw nothing
    expect(h.node("A").stats().fallbacks).toBe(1);
    expect(h.members.get("A")?.runs.size).toBe(1); // r1 runs at A now
    h.finishRuns("A");
    expect(h.repliesFor("r1")[0]?.record).toMatchObject({ servedBy: "A", fallbacks: 1 });
  });

  it("a hedge on it ends: it is not asked again, and runs nothing", () => {
    const h = setup();
    answerLost(h, "r1", prompt(1, 1));
    // Its answer's probes lost too: A gives B up and runs r1 itself, asking B again meanwhile.
    untilFallback(h, "A", toB, 10_000);
    expect(h.members.get("A")?.runs.size).toBe(1);
    h.drop(toB);
    quickRestart(h);
    h.advanceLive(4 * ACK_MS);
    expect(h.mailbox.filter(toB)).toHaveLength(0);
    h.deliver();
    expect(h.members.get("B")?.runs.size).toBe(0);
    h.finishRuns("A");
    expect(h.repliesFor("r1")).toHaveLength(1);
    expect(h.repliesFor("r1")[0]?.record).toMatchObject({ servedBy: "A" });
  });
});

describe("gossip mode: which epochs show a restart", () => {
  const tree = new RadixTree({ capacity: 4096 });
  const digest = (owner: string, epoch: number): GossipMessage => ({
    type: "digest",
    entries: [{ owner, epoch, version: 0 }],
    room: 0,
  });
  const hear = (g: ReturnType<typeof gossiper>, from: string, msg: GossipMessage) => {
    const out: Effect[] = [];
    g.onGossip(from, msg, 0, tree, 0, 0, out);
    return g.drainRestarted();
  };
  /** What `g` hears from `from`, then the members it found back in a newer epoch than they left in. */
  const renewedAt = (g: ReturnType<typeof gossiper>) => (from: string, msg: GossipMessage) => {
    hear(g, from, msg);
    return g.drainRenewed();
  };

  it("only a strictly newer epoch of a member, from a member; never on first contact", () => {
    const a = gossiper("A", ["B", "C"]);
    expect(hear(a, "B", digest("B", 5))).toEqual([]); // first contact
    expect(hear(a, "C", digest("B", 5))).toEqual([]); // the same epoch, relayed
    expect(hear(a, "C", digest("B", 4))).toEqual([]); // an older one (a stale relay)
    expect(hear(a, "X", digest("B", 9))).toEqual([]); // from a non-member
    expect(hear(a, "C", digest("X", 1))).toEqual([]); // of a non-member
    expect(hear(a, "C", digest("X", 2))).toEqual([]);
    expect(hear(a, "C", digest("B", 6))).toEqual([{ id: "B", epoch: 6 }]); // a relay saw B's restart
    expect(hear(a, "B", digest("B", 6))).toEqual([]); // reported once
    expect(hear(a, "B", digest("A", 99))).toEqual([]); // ourselves
  });

  // Forwarded to again once back, its old process may have acked jobs the new one lost
  // (renewed-forwards.test.ts).
  it("a member back in a newer epoch than it left in restarted: what an older one acked is lost", () => {
    const a = gossiper("A", ["B"]);
    expect(hear(a, "B", digest("B", 5))).toEqual([]);
    a.remove("B");
    a.add("B");
    expect(hear(a, "B", digest("B", 7))).toEqual([{ id: "B", epoch: 7 }]);
    expect(hear(a, "B", digest("B", 8))).toEqual([{ id: "B", epoch: 8 }]);
    a.remove("B");
    a.add("B");
    expect(hear(a, "B", digest("B", 8))).toEqual([]); // the epoch it left in: the same process
  });

  // Its trust is kept while it is out (trust.ts): only another process, a newer epoch, renews it.
  it("one back in a newer epoch than it left in is renewed; the same epoch (a refuted death) is not", () => {
    const a = gossiper("A", ["B", "C"]);
    const renewed = renewedAt(a);
    expect(renewed("B", digest("B", 5))).toEqual([]);
    a.remove("B");
    expect(renewed("C", digest("B", 6))).toEqual([]); // not a member now
    a.add("B");
    expect(renewed("B", digest("B", 5))).toEqual([]); // refuted: the epoch it left in
    expect(renewed("B", digest("B", 5))).toEqual([]);
    a.remove("B");
    a.add("B");
    expect(renewed("C", digest("B", 4))).toEqual([]); // a stale relay: waits for a newer one
    expect(renewed("C", digest("B", 6))).toEqual(["B"]); // restarted while out
    expect(renewed("B", digest("B", 7))).toEqual([]); // a member now: a restart, not a return
    // Never heard of before it went: nothing to compare with.
    a.remove("C");
    a.add("C");
    expect(renewed("C", digest("C", 3))).toEqual([]);
  });

  // Others still hold its state from before it went: their digests name the epoch it left in until
  // its new state reaches them, and may reach us before its own word does.
  it("a relay naming the epoch it left in does not hide a restart while out", () => {
    const a = gossiper("A", ["B", "C"]);
    const renewed = renewedAt(a);
    renewed("B", digest("B", 5));
    a.remove("B");
    a.add("B");
    expect(renewed("C", digest("B", 5))).toEqual([]); // C's copy from before it went
    expect(renewed("B", digest("B", 6))).toEqual(["B"]); // its own: restarted while out
    a.remove("B");
    a.add("B");
    expect(renewed("C", digest("B", 6))).toEqual([]);
    expect(renewed("B", digest("B", 6))).toEqual([]); // its own word: a refuted death
    expect(renewed("B", digest("B", 7))).toEqual([]); // a member now: a restart, not a return
  });

  it("a flap heard of only through a stale relay keeps the epoch it first left in", () => {
    const a = gossiper("A", ["B", "C"]);
    const renewed = renewedAt(a);
    renewed("B", digest("B", 5));
    a.remove("B");
    a.add("B");
    expect(renewed("C", digest("B", 3))).toEqual([]); // older than it left in: stale
    a.remove("B"); // gone again before its own word came
    a.add("B");
    expect(renewed("B", digest("B", 5))).toEqual([]); // the same process all along
  });
});
