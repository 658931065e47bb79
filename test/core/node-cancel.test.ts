/**
 * Cancelling abandoned forwards: when the origin moves a request on, the abandoned target drops it if
 * it has not started it, so a fallback never makes two nodes compute the same request; and a target
 * that cannot finish before the origin's deadline refuses at once instead of holding it.
 */
import { describe, expect, it } from "vitest";
import type { Effect } from "../../src/core/node/types.js";
import { forwardsIn, Harness, isType, prompt, warmPair } from "./node-harness.js";

function sends(effects: Effect[], type: string): Effect[] {
  return effects.filter((e) => e.type === "send" && e.msg.type === type);
}

function engineRuns(effects: Effect[]): number {
  return effects.filter((e) => e.type === "engine-run").length;
}

/** A, B; B holds topic 1 so A forwards topic-1 prompts to B. */
function setup(): Harness {
  return warmPair();
}

describe("PrefixNode — cancel of abandoned forwards", () => {
  it("drops a queued forward on cancel: the request is computed once, answered once", () => {
    const h = setup();
    h.client("B", "busy", prompt(9, 1)); // B's only slot is taken
    const eff = h.client("A", "r1", prompt(1, 1));
    expect(sends(eff, "forward").map((e) => e.type === "send" && e.to)).toEqual(["B"]);
    const fwd = h.mailbox.find(isType("forward"))!;
    h.drop((m) => m === fwd);
    const atB = h.input("B", { type: "peer-message", from: fwd.from, msg: fwd.msg });
    expect(engineRuns(atB)).toBe(0); // queued behind "busy"
    expect(h.node("B").queueDepth()).toBe(2);
    h.advanceLive(1_000, 100); // A's forward timeout: cancel to B, then local
    const cancel = h.mailbox.filter(isType("cancel"));
    expect(cancel).toHaveLength(1);
    expect(cancel[0]).toMatchObject({ from: "A", to: "B", msg: { reqId: "r1", attempt: 1 } });
    h.deliver(isType("cancel"));
    expect(h.node("B").stats().cancelledForwards).toBe(1);
    expect(h.node("B").queueDepth()).toBe(1);
    // B finishes "busy" and starts nothing else; A serves r1 itself.
    const runsBefore = h.node("B").stats().servedForPeers;
    h.finishRuns();
    expect(h.node("B").stats().servedForPeers).toBe(runsBefore);
    expect(h.node("B").queueDepth()).toBe(0);
    h.deliver();
    const replies = h.repliesFor("r1");
    expect(replies).toHaveLength(1);
    expect(replies[0]?.record.servedBy).toBe("A");
    expect(replies[0]?.record.fallbacks).toBe(1);
    // B said it dropped the cancelled forward (so no stream waits on it); A, moved on, counts it late.
    expect(h.node("A").stats().lateReplies).toBe(1);
  });

  it("a running forward is not dropped: it finishes and its reply is dropped as late", () => {
    const h = setup();
    h.client("A", "r1", prompt(1, 1));
    h.deliver(isType("forward"));
    expect(h.node("B").queueDepth()).toBe(1); // running
    h.advanceLive(1_000, 100);
    h.deliver(isType("cancel"));
    expect(h.node("B").stats().cancelledForwards).toBe(0);
    h.finishRuns();
    h.deliver();
    expect(h.node("B").stats().servedForPeers).toBe(1);
    expect(h.node("A").stats().lateReplies).toBe(1);
    expect(h.repliesFor("r1")).toHaveLength(1);
    expect(h.repliesFor("r1")[0]?.record.servedBy).toBe("A");
  });

  it("a late answer still answers a request waiting in the origin's queue: it never runs twice", () => {
    const h = setup();
    h.client("A", "busy", prompt(9, 1)); // A's only slot is taken
    expect(h.node("A").queueDepth()).toBe(1);
    h.client("A", "r1", prompt(1, 1));
    h.deliver(isType("forward"));
    expect(h.node("B").queueDepth()).toBe(1); // running at B
    h.drop(isType("forward-ack")); // lost: A gives up on B and queues r1 behind "busy"
    h.advanceLive(1_000, 100);
    expect(h.node("A").queueDepth()).toBe(2);
    h.deliver(isType("cancel")); // too late for B: it runs already
    h.finishRuns("B");
    h.deliver(); // B's answer: r1 still waits at A, so it is answered now and leaves A's queue
    const replies = h.repliesFor("r1");
    expect(replies).toHaveLength(1);
    expect(replies[0]?.record.servedBy).toBe("B");
    expect(h.node("A").queueDepth()).toBe(1);
    h.finishRuns();
    h.deliver();
    expect(h.repliesFor("r1")).toHaveLength(1);
    expect(h.repliesFor("busy")).toHaveLength(1);
    expect(h.node("A").queueDepth()).toBe(0);
  });

  it("a late answer still answers a request forwarded on to another peer, which is cancelled", () => {
    const h = new Harness(["A", "B", "C"]);
    h.warm("B", "warmB", prompt(1, 0));
    h.warm("C", "warmC", prompt(1, 0));
    h.gossip(3);
    // Both holders are busy: a forward waits in their queue.
    h.client("B", "busyB", prompt(9, 1));
    h.client("C", "busyC", prompt(8, 1));
    const first = forwardsIn(h.client("A", "r1", prompt(1, 1)));
    expect(first).toHaveLength(1);
    const [to, other] = first[0] === "B" ? ["B", "C"] : ["C", "B"];
    h.deliver(isType("forward"));
    h.drop(isType("forward-ack")); // lost: A moves on to the other holder
    const toOther = (m: { msg: { type: string }; to: string }) => m.msg.type === "forward" && m.to === other;
    for (let t = 0; t < 1_000 && !h.mailbox.some(toOther); t += 10) h.advanceLive(10, 10);
    h.drop(isType("cancel"));
    h.deliver(toOther);
    h.deliver(isType("forward-ack"));
    expect(h.node(other).queueDepth()).toBe(2); // r1 waits behind busyC
    h.finishRuns(to); // busy done; r1 starts at `to`
    h.finishRuns(to);
    h.deliver((m) => m.msg.type === "result" && m.from === to);
    const replies = h.repliesFor("r1");
    expect(replies).toHaveLength(1);
    expect(replies[0]?.record.servedBy).toBe(to);
    // One fallback (the lost ack); the late answer ending the other attempt is not a second.
    expect(replies[0]?.record.fallbacks).toBe(1);
    // The attempt at the other peer is abandoned with a cancel: it never runs there.
    expect(h.mailbox.filter((m) => m.msg.type === "cancel" && m.to === other)).toHaveLength(1);
    h.deliver();
    expect(h.node(other).queueDepth()).toBe(1);
    h.finishRuns();
    h.deliver();
    expect(h.repliesFor("r1")).toHaveLength(1);
    expect(h.node(other).stats().servedForPeers).toBe(0);
  });

  it("a cancel that overtakes its forward makes the receiver drop the forward on arrival", () => {
    const h = setup();
    h.client("A", "r1", prompt(1, 1));
    h.advanceLive(1_000, 100);
    h.deliver(isType("cancel"));
    const atB = h.mailbox.filter(isType("forward"));
    expect(atB).toHaveLength(1);
    let runs = 0;
    for (const m of atB) runs += engineRuns(h.input("B", { type: "peer-message", from: m.from, msg: m.msg }));
    h.drop(isType("forward"));
    expect(runs).toBe(0);
    expect(h.node("B").stats().cancelledForwards).toBe(1);
    expect(h.node("B").stats().duplicateForwards).toBe(0);
    h.finishRuns();
    h.deliver();
    expect(h.repliesFor("r1")).toHaveLength(1);
  });

  it("stays exactly-once with a peer that ignores cancels (lost cancel)", () => {
    const h = setup();
    h.client("B", "busy", prompt(9, 1));
    h.client("A", "r1", prompt(1, 1));
    h.deliver(isType("forward"));
    h.advanceLive(1_000, 100);
    expect(h.drop(isType("cancel"))).toBe(1);
    h.finishRuns(); // B: "busy" done, starts r1; A: r1 done locally
    h.finishRuns();
    h.deliver();
    expect(h.repliesFor("r1")).toHaveLength(1);
    expect(h.node("B").stats().servedForPeers).toBe(1); // wasted, but harmless
    expect(h.node("A").stats().lateReplies).toBe(1);
  });

  it("a peer that said goodbye drains its work: only the final cancel once our own run starts", () => {
    const h = setup();
    h.client("A", "r1", prompt(1, 1));
    h.deliver(isType("forward"));
    const eff = h.input("A", { type: "peer-message", from: "B", msg: { type: "goodbye" } });
    expect(engineRuns(eff)).toBe(1); // fell back to local at once: B's answer can no longer be taken
    expect(eff.filter((e) => e.type === "send")).toMatchObject([
      { to: "B", msg: { type: "cancel", reqId: "r1", attempt: 1, final: true } },
    ]);
  });

  it("forwards carry the deadline: our timeout less the measured round trip", () => {
    const h = setup();
    const eff = h.client("A", "r1", prompt(1, 1));
    const fwd = sends(eff, "forward")[0];
    const deadline = fwd?.type === "send" && fwd.msg.type === "forward" ? fwd.msg.deadlineMs : undefined;
    expect(deadline).toBeGreaterThan(0);
    expect(deadline).toBeLessThanOrEqual(1_000);
  });

  it("refuses at once a forward it cannot finish before the origin's deadline", () => {
    const h = new Harness(["A", "B"]);
    h.warm("B", "warm", prompt(1, 0), 400); // B measures a 400 ms service time
    h.gossip(3);
    // B: one running, three waiting → expected wait ≈ (3 + ½) × 400 = 1400 ms > 1.25 × 1000 ms.
    for (let i = 0; i < 4; i++) h.client("B", `busy${i}`, prompt(9, i));
    h.client("A", "r1", prompt(1, 1));
    h.deliver(isType("forward"));
    expect(h.node("B").stats().rejectedDeadline).toBe(1);
    expect(h.node("B").queueDepth()).toBe(4); // not queued
    const err = h.mailbox.find(isType("error"));
    expect(err?.msg).toMatchObject({ type: "error", reqId: "r1", retryable: true });
    h.deliver(isType("error")); // A falls back now, not after its 1 s timeout
    expect(h.now).toBeLessThan(1_000);
    h.finishRuns("A");
    expect(h.repliesFor("r1")).toHaveLength(1);
    expect(h.repliesFor("r1")[0]?.record.servedBy).toBe("A");
  });

  it("accepts a forward it can start in time, and one without a deadline (older peers)", () => {
    const h = new Harness(["A", "B"]);
    h.warm("B", "warm", prompt(1, 0), 400);
    h.gossip(3);
    // One running, two waiting → expected wait ≈ 1000 ms: within the 1.25 × 1000 ms slack.
    for (let i = 0; i < 3; i++) h.client("B", `busy${i}`, prompt(9, i));
    h.client("A", "r1", prompt(1, 1));
    h.deliver(isType("forward"));
    expect(h.node("B").queueDepth()).toBe(4);
    expect(h.node("B").stats().rejectedDeadline).toBe(0);
    const req = { id: "r2", tokens: prompt(1, 2), maxTokens: 1 };
    h.input("B", {
      type: "peer-message",
      from: "A",
      msg: { type: "forward", reqId: "r2", attempt: 1, hops: 1, request: req },
    });
    expect(h.node("B").stats().rejectedDeadline).toBe(0);
    expect(h.node("B").queueDepth()).toBe(5);
  });

  it("ignores malformed cancels and deadlines", () => {
    const h = setup();
    const long = "x".repeat(600);
    h.input("B", { type: "peer-message", from: "A", msg: { type: "cancel", reqId: long, attempt: 1 } });
    expect(h.node("B").stats().invalidMessages).toBe(1);
    const req = { id: "r", tokens: prompt(1, 2), maxTokens: 1 };
    for (const deadlineMs of [Number.NaN, -1, Number.POSITIVE_INFINITY]) {
      h.input("B", {
        type: "peer-message",
        from: "A",
        msg: { type: "forward", reqId: `r${deadlineMs}`, attempt: 1, hops: 1, request: req, deadlineMs },
      });
    }
    expect(h.node("B").stats().rejectedDeadline).toBe(0);
    expect(h.node("B").queueDepth()).toBe(3);
  });
});

describe("PrefixNode — a forward whose deadline passes while it waits", () => {
  it("is dropped when its turn comes, never run; one still in time runs", () => {
    const h = new Harness(["A", "B"]);
    const forward = (reqId: string, deadlineMs: number | undefined) =>
      h.input("B", {
        type: "peer-message",
        from: "A",
        msg: {
          type: "forward",
          reqId,
          attempt: 1,
          hops: 1,
          request: { id: reqId, tokens: prompt(2, Number(reqId.slice(1))), maxTokens: 1 },
          ...(deadlineMs === undefined ? {} : { deadlineMs }),
        },
      });
    const running = h.client("B", "busy", prompt(9, 0));
    expect(engineRuns(running)).toBe(1);
    forward("f1", 200); // queued behind `busy`; its origin waits 200 ms more
    forward("f2", 5_000);
    forward("f3", undefined); // an older peer: no deadline, never expires
    expect(h.node("B").queueDepth()).toBe(4);
    h.advanceLive(300);
    h.finishRuns("B"); // `busy` ends after f1's deadline: f1 is skipped, f2 starts
    expect(h.node("B").stats().expiredForwards).toBe(1);
    expect(h.node("B").queueDepth()).toBe(2);
    h.finishRuns("B");
    h.finishRuns("B");
    expect(h.node("B").stats().servedForPeers).toBe(2);
    expect(h.node("B").stats().expiredForwards).toBe(1);
  });
});
