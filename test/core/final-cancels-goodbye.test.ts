/**
 * A peer that said goodbye drains what it took: it is still owed its final cancels, on the full mesh
 * and in gossip mode, where its leave drops it from the members so its answers are taken no more.
 */
import { describe, expect, it } from "vitest";
import { ACK_MS, forwardToB, runs, setup, to, twoHolders } from "./final-cancels-harness.js";
import {
  DAEMON_RECOVERY,
  daemonGossip,
  type Harness,
  isType,
  prompt,
  untilFallback,
  warmPair,
} from "./node-harness.js";

describe("a peer that said goodbye drains what it took: it is still owed its final cancels", () => {
  // Anti-entropy rounds still go to a departed member on the full mesh (it is down until it speaks).
  const sentToB = (h: Harness) => h.mailbox.filter((m) => m.to === "B" && m.msg.type !== "snapshot");

  it("full mesh: r1 running at B, B leaves, r1 runs here: B gets a final cancel, nothing else", () => {
    const h = setup();
    h.client("A", "x1", prompt(7, 1)); // A busy: r1 will wait in A's queue
    h.client("A", "r1", prompt(1, 1));
    h.deliver(forwardToB);
    h.deliver(isType("forward-ack"));
    expect(runs(h, "B")).toBe(1);
    h.apply("B", h.node("B").goodbye());
    h.deliver(isType("goodbye"));
    expect(h.node("A").queueDepth()).toBe(2); // r1 fell back here, behind x1
    expect(sentToB(h)).toHaveLength(0); // no cancel yet: B's answer could still take r1
    h.finishRuns("A"); // x1 ends, r1 starts: B's answer is taken no more
    h.advance(2_000); // rounds and timers: nothing but the cancel goes to B (no forward, no re-ask)
    expect(sentToB(h).map((m) => m.msg)).toEqual([{ type: "cancel", reqId: "r1", attempt: 1, final: true }]);
    h.deliver((m) => m.msg.type === "cancel");
    expect(h.endAborted("B")).toBe(1);
    expect(h.node("B").stats().abortedCancelled).toBe(1);
  });

  it("full mesh: B leaves, r1 is answered by C: B gets a final cancel and aborts", () => {
    const { h, first, second } = twoHolders();
    h.deliver(to(first, "forward"));
    h.deliver(isType("forward-ack"));
    h.apply(first, h.node(first).goodbye());
    h.deliver(isType("goodbye"));
    expect(h.mailbox.filter((m) => m.to === first && m.msg.type !== "snapshot")).toHaveLength(0);
    h.deliver(to(second, "forward"));
    h.deliver(isType("forward-ack"));
    h.finishRuns(second);
    h.deliver(isType("result"));
    expect(h.repliesFor("r1")).toMatchObject([{ record: { servedBy: second } }]);
    expect(h.mailbox.filter((m) => m.to === first && m.msg.type !== "snapshot").map((m) => m.msg)).toEqual([
      { type: "cancel", reqId: "r1", attempt: 1, final: true },
    ]);
    h.deliver(to(first, "cancel"));
    expect(h.endAborted(first)).toBe(1);
  });

  it("full mesh: B leaves while r1 runs here with a hedge on B: B's run gets its final cancel now", () => {
    const h = warmPair({
      ...DAEMON_RECOVERY,
      maxTimedOutAttempts: 64,
      forwardAckTimeoutMs: ACK_MS,
      forwardTimeoutMs: 30_000,
      abortRuns: true,
    });
    h.client("A", "r1", prompt(1, 1));
    h.deliver(forwardToB);
    h.deliver(isType("forward-ack"));
    expect(runs(h, "B")).toBe(1);
    // B's answer goes overdue: A runs r1 itself, asking B again meanwhile (its hedge).
    untilFallback(h, "A", forwardToB, 30_000);
    expect(runs(h, "A")).toBe(1);
    h.drop(forwardToB);
    h.apply("B", h.node("B").goodbye());
    h.deliver(isType("goodbye"));
    // The hedge ends with B's leave; r1's run here has started, so no answer of B's is taken any
    // more: the cancel is final, not one that leaves B's run going until r1 ends here.
    expect(sentToB(h).map((m) => m.msg)).toEqual([{ type: "cancel", reqId: "r1", attempt: 1, final: true }]);
    h.deliver(to("B", "cancel"));
    expect(h.endAborted("B")).toBe(1);
    h.finishRuns("A");
    expect(h.repliesFor("r1")).toMatchObject([{ record: { servedBy: "A" } }]);
    expect(sentToB(h)).toHaveLength(0);
  });

  it("gossip mode: B's leave drops it from the members, so its answer is taken no more: the final cancel goes at once", () => {
    const h = daemonGossip(["A", "B"], ACK_MS, { abortRuns: true });
    h.client("A", "x1", prompt(7, 1));
    h.client("A", "r1", prompt(1, 1));
    h.deliver(forwardToB);
    h.deliver(isType("forward-ack"));
    expect(runs(h, "B")).toBe(1);
    h.apply("B", h.node("B").goodbye());
    h.deliverMesh();
    expect(h.node("A").memberIds()).not.toContain("B");
    expect(h.node("A").queueDepth()).toBe(2);
    // A non-member's answer is dropped unread, so B's run can serve nobody: aborted now, not once
    // r1 has run here (B would spend its drain on it meanwhile).
    expect(sentToB(h).map((m) => m.msg)).toEqual([{ type: "cancel", reqId: "r1", attempt: 1, final: true }]);
    h.deliver((m) => m.msg.type === "cancel");
    expect(h.endAborted("B")).toBe(1);
    h.finishRuns("A"); // x1 ends, r1 runs here and is answered once
    h.finishRuns("A");
    expect(h.repliesFor("r1")).toMatchObject([{ record: { servedBy: "A" } }]);
    expect(sentToB(h)).toHaveLength(0); // and nothing more: no second cancel
  });

  it("gossip mode: an answer B sends after its leave answers nothing", () => {
    const h = daemonGossip(["A", "B"], ACK_MS, { abortRuns: false });
    h.client("A", "x1", prompt(7, 1));
    h.client("A", "r1", prompt(1, 1));
    h.deliver(forwardToB);
    h.deliver(isType("forward-ack"));
    h.apply("B", h.node("B").goodbye());
    h.deliverMesh();
    h.finishRuns("B");
    h.deliver(isType("result"));
    // Dropped as a non-member's: r1 still waits here, behind x1.
    expect(h.repliesFor("r1")).toEqual([]);
    expect(h.node("A").queueDepth()).toBe(2);
  });
});
