/**
 * Algorithm 1 when peers fail, by hand: liveness (suspected, down, goodbye, leaving), forward
 * timeouts, crashes and refused connections, each answered once; driven through the harness.
 */
import { describe, expect, it } from "vitest";
import { simOutput } from "../../src/engines/sim/cost.js";
import { forwardsIn, Harness, isType, prompt } from "./node-harness.js";

describe("PrefixNode — Algorithm 1", () => {
  it("skips a suspected peer (silent for k × Δpoll) and clears suspicion on any message", () => {
    const h = new Harness(["A", "B"], { suspectAfterPolls: 3 });
    h.warm("B", "wb", prompt(5, 1));
    h.gossip(3);
    h.advance(350); // B's snapshots never arrive
    h.drop((m) => m.from === "B");
    expect(h.node("A").peers()[0]?.liveness).toBe("suspected");
    expect(forwardsIn(h.client("A", "r1", prompt(5, 2)))).toEqual([]);
    h.advance(100);
    h.deliver((m) => m.from === "B");
    expect(h.node("A").peers()[0]?.liveness).toBe("live");
    expect(forwardsIn(h.client("A", "r2", prompt(5, 3)))).toEqual(["B"]);
  });

  it("a silent peer is suspected, then down after downAfterPolls × Δpoll; any message revives it", () => {
    const h = new Harness(["A", "B"], { suspectAfterPolls: 3, downAfterPolls: 6 });
    h.gossip(3);
    expect(h.node("A").peers()[0]?.liveness).toBe("live");
    h.advance(350); // B's snapshots never arrive (a crash: no goodbye)
    h.drop((m) => m.from === "B");
    expect(h.node("A").peers()[0]?.liveness).toBe("suspected");
    h.advance(300);
    h.drop((m) => m.from === "B");
    expect(h.node("A").peers()[0]?.liveness).toBe("down");
    h.advance(100);
    h.deliver((m) => m.from === "B");
    expect(h.node("A").peers()[0]?.liveness).toBe("live");
  });

  it("a peer never heard from goes unknown → suspected → down, counted from our start", () => {
    const h = new Harness(["A", "B"], { suspectAfterPolls: 3, downAfterPolls: 6 });
    h.drop((m) => m.from === "B");
    expect(h.node("A").peers()[0]?.liveness).toBe("unknown");
    h.advance(350);
    h.drop((m) => m.from === "B");
    expect(h.node("A").peers()[0]?.liveness).toBe("suspected");
    h.advance(300);
    h.drop((m) => m.from === "B");
    expect(h.node("A").peers()[0]?.liveness).toBe("down");
  });

  it("without downAfterPolls a silent peer stays suspected (only a goodbye makes it down)", () => {
    const h = new Harness(["A", "B"], { suspectAfterPolls: 3 });
    h.gossip(3);
    h.advance(10_000);
    h.drop((m) => m.from === "B");
    expect(h.node("A").peers()[0]?.liveness).toBe("suspected");
  });

  it("refuses a down bound not above the suspect bound", () => {
    expect(() => new Harness(["A", "B"], { suspectAfterPolls: 3, downAfterPolls: 3 })).toThrow(
      /downAfterPolls must exceed suspectAfterPolls/,
    );
  });

  it("forward timeout → next best → local, answered exactly once; late replies dropped", () => {
    // No ack wait (ack timeout = forward timeout): this is about the forward timeout itself.
    const h = new Harness(["A", "B", "C"], {
      forwardTimeoutMs: 500,
      forwardAckTimeoutMs: 500,
      suspectAfterPolls: 100,
    });
    h.warm("B", "wb", prompt(6, 1));
    h.warm("C", "wc", prompt(6, 2, 32, 48));
    h.gossip(3);
    const tokens = prompt(6, 3);
    expect(forwardsIn(h.client("A", "r", tokens))).toEqual(["B"]);
    h.deliver((m) => m.to === "B" && m.msg.type === "forward"); // B runs it but is slow
    h.advance(500); // timeout → C
    const toC = h.mailbox.filter(isType("forward"));
    expect(toC.map((m) => m.to)).toEqual(["C"]);
    h.deliver(isType("forward"));
    // C fails the run: the error makes A try its next candidate, which is itself.
    const cRun = [...(h.members.get("C")?.runs.keys() ?? [])][0]!;
    h.input("C", { type: "engine-failed", jobId: cRun, error: "boom" });
    h.members.get("C")?.runs.clear();
    h.deliver(isType("error"));
    h.finishRuns("A");
    // B finally answers: too late.
    h.finishRuns("B");
    h.deliver(isType("result"));
    const replies = h.repliesFor("r");
    expect(replies).toHaveLength(1);
    expect(replies[0]?.record.servedBy).toBe("A");
    expect(replies[0]?.record.fallbacks).toBe(2);
    expect(replies[0]?.outcome.ok && replies[0].outcome.result.text).toBe(simOutput(tokens, 1));
    expect(h.node("A").stats().lateReplies).toBe(1);
  });

  it("target crashes mid-request: re-sent on its restart (new epoch), answered once", () => {
    const h = new Harness(["A", "B"], { forwardTimeoutMs: 60_000, suspectAfterPolls: 100 });
    h.warm("B", "wb", prompt(7, 1));
    h.gossip(3);
    const tokens = prompt(7, 2);
    expect(forwardsIn(h.client("A", "r", tokens))).toEqual(["B"]);
    h.deliver(isType("forward"));
    h.crash("B");
    h.restart("B");
    h.gossip(1); // B's first snapshot carries its new epoch: A learns B lost everything
    expect(h.node("A").peerIndex().estimateSize("B")).toBe(0);
    // Full-mesh acks name no epoch: which process took r is unknown, so it goes to B again.
    expect(h.members.get("A")?.runs.size).toBe(0);
    h.deliver(isType("forward"));
    h.finishRuns("B");
    h.gossip(2);
    h.deliver(isType("result"));
    const replies = h.repliesFor("r");
    expect(replies).toHaveLength(1);
    expect(replies[0]?.record).toMatchObject({ servedBy: "B", fallbacks: 0 });
    expect(replies[0]?.outcome.ok && replies[0].outcome.result.text).toBe(simOutput(tokens, 1));
  });

  it("connection refused suspects the peer at once and fails over", () => {
    const h = new Harness(["A", "B"]);
    h.warm("B", "wb", prompt(8, 1));
    h.gossip(3);
    h.client("A", "r", prompt(8, 2));
    const fwd = h.mailbox.find(isType("forward"))!;
    h.drop((m) => m === fwd);
    const eff = h.input("A", { type: "send-failed", to: "B", msg: fwd.msg, reason: "ECONNREFUSED" });
    expect(eff.some((e) => e.type === "engine-run")).toBe(true);
    expect(h.node("A").peers()[0]?.liveness).toBe("suspected");
    h.finishRuns("A");
    expect(h.repliesFor("r")).toHaveLength(1);
  });

  it("goodbye stops routing to a peer at once", () => {
    const h = new Harness(["A", "B"]);
    h.warm("B", "wb", prompt(11, 1));
    h.gossip(3);
    h.input("A", { type: "peer-message", from: "B", msg: { type: "goodbye" } });
    expect(h.node("A").peers()[0]?.liveness).toBe("down");
    expect(forwardsIn(h.client("A", "r", prompt(11, 2)))).toEqual([]);
  });

  it("a peer that left stays down while it drains, and is back once it restarts", () => {
    const h = new Harness(["A", "B"]);
    h.warm("B", "wb", prompt(12, 1));
    h.gossip(3);
    h.client("A", "r", prompt(12, 2));
    h.deliver(isType("forward"));
    h.apply("B", h.node("B").goodbye());
    h.deliver(isType("goodbye"));
    expect(h.node("A").peers()[0]?.liveness).toBe("down");
    // Draining, B sends no more anti-entropy, and its answer to the forward does not revive it.
    h.advance(500);
    expect(h.mailbox.filter((m) => m.from === "B" && m.msg.type === "snapshot")).toEqual([]);
    h.finishRuns("B");
    h.deliver();
    expect(h.node("A").peers()[0]?.liveness).toBe("down");
    expect(forwardsIn(h.client("A", "r2", prompt(12, 3)))).toEqual([]);
    // Restarted, its first snapshot says it is back.
    h.restart("B");
    h.gossip(2);
    expect(h.node("A").peers()[0]?.liveness).toBe("live");
  });
});
