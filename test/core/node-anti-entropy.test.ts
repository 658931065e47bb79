/** §3's anti-entropy by hand: full snapshots, deltas, heartbeats, repair and bounds on what peers send. */
import { describe, expect, it } from "vitest";
import { Harness, isType, prompt } from "./node-harness.js";

describe("PrefixNode — anti-entropy", () => {
  it("sends a full snapshot first, then deltas when the tree changed, heartbeats when not", () => {
    const h = new Harness(["A", "B"]);
    h.gossip(3);
    const sentBy = () => ({ ...h.node("A").stats().snapshotsSent });
    h.warm("A", "a1", prompt(1, 1));
    const before = sentBy();
    h.gossip(1);
    const afterChange = sentBy();
    expect(afterChange.delta + afterChange.full).toBeGreaterThan(before.delta + before.full);
    h.gossip(1);
    const idle = sentBy();
    expect(idle.heartbeat).toBeGreaterThan(afterChange.heartbeat);
    expect(idle.delta + idle.full).toBe(afterChange.delta + afterChange.full);
    expect(h.node("B").heldOf("A")).toEqual({ epoch: 0, version: h.node("A").treeVersion() });
    expect(h.node("B").peerIndex().match("A", prompt(1, 1))).toBe(80);
  });

  it("repairs an estimate polluted by a wrong optimistic insert with a full snapshot", () => {
    const h = new Harness(["A", "B"]);
    h.gossip(3);
    // A wrongly believes B caches this prompt (e.g. B could not keep it).
    h.node("A").peerIndex().updateTrieEstimate("B", prompt(3, 3));
    expect(h.node("A").peerIndex().estimateSize("B")).toBe(80);
    h.gossip(4);
    expect(h.node("A").peerIndex().estimateSize("B")).toBe(0);
    expect(h.node("B").stats().snapshotsSent.full).toBeGreaterThanOrEqual(2);
  });

  it("re-sends a lost delta as soon as the peer's ack shows a later snapshot arrived without it", () => {
    // B polls slowly, so its acks take long and A's optimism window (2 × ack delay + a poll) is long.
    const h = new Harness(["A", "B"], {}, 10_000, (id) => (id === "B" ? { pollMs: 300 } : {}));
    h.warm("A", "a0", prompt(2, 1));
    h.gossip(12);
    h.warm("A", "a1", prompt(1, 1));
    h.advance(100);
    // A's delta carrying the change is lost (a send into a partition that then heals).
    expect(h.drop((m) => m.from === "A" && m.msg.type === "snapshot")).toBe(1);
    h.deliver(isType("snapshot"));
    const want = { epoch: 0, version: h.node("A").treeVersion() };
    expect(h.node("B").heldOf("A")).not.toEqual(want);
    let rounds = 0;
    while (rounds < 20 && h.node("B").heldOf("A")?.version !== want.version) {
      h.gossip(1);
      rounds++;
    }
    // B's next poll (≤ 300 ms) acks A's next heartbeat; A's round after that re-sends the delta.
    // Waiting out the window instead took 6 rounds.
    expect(rounds).toBeLessThanOrEqual(4);
    expect(h.node("B").heldOf("A")).toEqual(want);
    expect(h.node("B").peerIndex().match("A", prompt(1, 1))).toBe(80);
  });

  it("caps a peer's advertised push-back and refuses oversized peer request ids", () => {
    const h = new Harness(["A", "B"], { maxPushBackMs: 1_000 });
    h.gossip(2);
    const header = {
      sender: "B",
      epoch: 0,
      version: 0,
      tokenCount: 0,
      capacity: 10,
      queueDepth: 99,
      pushBackMs: 3_600_000,
    };
    h.input("A", {
      type: "peer-message",
      from: "B",
      msg: { type: "snapshot", snapshot: { kind: "heartbeat", header } },
    });
    expect(h.node("A").peers()[0]?.pushBackUntil).toBe(h.now + 1_000);
    // A heartbeat of a version already held still refreshes what the peer advertises.
    expect(h.node("A").peers()[0]?.queueDepth).toBe(99);
    const msg = {
      type: "forward" as const,
      reqId: "x".repeat(600),
      attempt: 1,
      hops: 1,
      request: { id: "x", tokens: prompt(1, 1), maxTokens: 1 },
    };
    expect(h.input("A", { type: "peer-message", from: "B", msg })).toEqual([]);
    expect(h.node("A").stats().invalidMessages).toBe(1);
  });
});
