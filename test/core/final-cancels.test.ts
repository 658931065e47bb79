/**
 * Final cancels owed (abort-runs.ts `owedCancels`), hand-driven in the daemon's forward settings: a
 * request that moved on from a peer with a cancel that was not final (its late answer could still
 * answer it) sends that peer a final one once no answer of it can be taken (the request runs here,
 * or settled), so the peer aborts the run nobody takes any more; none to a peer that answered, one
 * known gone with a restart, or twice. Our own restart cancels finally too, a streaming hedge's
 * cancel is final once the local run started, and a hedge keeps the newest epoch its peer acked in.
 */
import { describe, expect, it } from "vitest";
import { markFinalCancels, owedCancels } from "../../src/core/node/abort-runs.js";
import type { Effect } from "../../src/core/node/types.js";
import {
  answerLost,
  DAEMON_RECOVERY,
  daemonGossip,
  Harness,
  isType,
  type Mail,
  prompt,
  untilFallback,
  warmPair,
} from "./node-harness.js";

const ACK_MS = 250;

/** A, B as the daemon runs them; B holds topic 1, so A forwards there. */
function setup(): Harness {
  return warmPair({
    ...DAEMON_RECOVERY,
    forwardAckTimeoutMs: ACK_MS,
    forwardTimeoutMs: 5_000,
    abortRuns: true,
  });
}

const runs = (h: Harness, id: string) => h.members.get(id)?.runs.size ?? 0;
const cancelsToB = (h: Harness) => h.mailbox.filter((m) => m.to === "B" && m.msg.type === "cancel");
const forwardToB = (m: Mail) => m.to === "B" && m.msg.type === "forward";

const to = (id: string, type: string) => (m: Mail) => m.to === id && m.msg.type === type;

/**
 * A, B and C, both B and C holding topic 1 and no cap on timed-out waits (r1 tries every peer before
 * running here); A's client request r1 sent to one of them (`first`), the other is `second`.
 */
function twoHolders(): { h: Harness; first: string; second: string } {
  const h = new Harness(["A", "B", "C"], {
    ...DAEMON_RECOVERY,
    forwardAckTimeoutMs: ACK_MS,
    forwardTimeoutMs: 5_000,
    abortRuns: true,
    maxTimedOutAttempts: 0,
  });
  h.warm("B", "warmB", prompt(1, 0));
  h.warm("C", "warmC", prompt(1, 0));
  h.gossip(3);
  h.client("A", "r1", prompt(1, 1));
  const first = h.mailbox.find(isType("forward"))?.to as string;
  return { h, first, second: first === "B" ? "C" : "B" };
}
const ackToA = (m: Mail) => m.to === "A" && m.msg.type === "forward-ack";

/**
 * A busy with a job of its own (x1); r1 reaches B and runs there, but B's acks (and the re-sends'
 * acks) are lost: A gives the attempt up with a cancel that is not final (delivered: B's run goes
 * on, its late answer could still take r1 out of A's queue) and queues r1 behind x1.
 */
function fellBackFromRunningB(h = setup()): Harness {
  h.client("A", "x1", prompt(7, 1));
  h.client("A", "r1", prompt(1, 1));
  h.deliver(forwardToB);
  expect(runs(h, "B")).toBe(1);
  untilFallback(h, "A", (m) => ackToA(m) || forwardToB(m), 30_000);
  expect(h.node("A").queueDepth()).toBe(2); // x1 runs, r1 waits
  const cancels = cancelsToB(h);
  expect(cancels).toHaveLength(1);
  expect(cancels[0]?.msg).not.toHaveProperty("final");
  h.deliver((m) => m.msg.type === "cancel");
  expect(h.aborts).toHaveLength(0);
  return h;
}

describe("final cancels owed to the peers a request moved on from", () => {
  it("its run here starts: B's answer can no longer be taken, B gets a final cancel and aborts", () => {
    const h = fellBackFromRunningB();
    h.finishRuns("A"); // x1 ends, r1 starts here
    expect(runs(h, "A")).toBe(1);
    expect(h.repliesFor("r1")).toHaveLength(0);
    expect(cancelsToB(h)).toMatchObject([{ msg: { reqId: "r1", attempt: 1, final: true } }]);
    h.deliver((m) => m.msg.type === "cancel");
    expect(h.aborts).toMatchObject([{ node: "B" }]);
    expect(h.endAborted("B")).toBe(1);
    h.deliver();
    h.finishRuns("A");
    expect(h.repliesFor("r1")).toMatchObject([{ record: { servedBy: "A" } }]);
    expect(cancelsToB(h)).toHaveLength(0); // owed nothing more when it settles
    expect(h.node("B").stats()).toMatchObject({ abortedCancelled: 1, engineFailures: 0 });
  });

  it("its client hangs up while it waits here: B's final cancel goes with the hang-up", () => {
    const h = fellBackFromRunningB();
    h.input("A", { type: "client-gone", reqId: "r1" });
    expect(cancelsToB(h)).toMatchObject([{ msg: { reqId: "r1", attempt: 1, final: true } }]);
    h.deliver((m) => m.msg.type === "cancel");
    expect(h.endAborted("B")).toBe(1);
    expect(h.node("B").stats().abortedCancelled).toBe(1);
  });

  it("B's late answer while it waits here is the reply: B is owed nothing", () => {
    const h = fellBackFromRunningB();
    h.finishRuns("B");
    h.deliver(isType("result"));
    expect(h.repliesFor("r1")).toMatchObject([{ record: { servedBy: "B" } }]);
    h.finishRuns("A");
    expect(cancelsToB(h)).toHaveLength(0);
  });

  it("answered by the next peer: the first one gets a final cancel and aborts", () => {
    const { h, first, second } = twoHolders();
    h.deliver(to(first, "forward"));
    expect(runs(h, first)).toBe(1);
    // Its acks lost: A moves on to the other holder, with a cancel that is not final.
    for (let t = 0; !h.mailbox.some(to(second, "forward")); t += 10) {
      if (t > 30_000) throw new Error("no second attempt within 30 s");
      h.drop((m) => ackToA(m) || to(first, "forward")(m));
      h.advanceLive(10);
    }
    expect(h.mailbox.filter(to(first, "cancel"))).toMatchObject([{ msg: { reqId: "r1", attempt: 1 } }]);
    expect(h.mailbox.find(to(first, "cancel"))?.msg).not.toHaveProperty("final");
    h.deliver(to(first, "cancel"));
    h.deliver(to(second, "forward"));
    h.deliver(isType("forward-ack"));
    h.finishRuns(second);
    h.deliver(isType("result"));
    expect(h.repliesFor("r1")).toMatchObject([{ record: { servedBy: second } }]);
    expect(h.mailbox.filter(to(first, "cancel"))).toMatchObject([
      { msg: { reqId: "r1", attempt: 1, final: true } },
    ]);
    h.deliver(to(first, "cancel"));
    expect(h.endAborted(first)).toBe(1);
    expect(h.node(first).stats().abortedCancelled).toBe(1);
  });

  it("each attempt's peer gets one final cancel, even when the hedge's end names it too", () => {
    const h = setup();
    answerLost(h, "r1", prompt(1, 1)); // acked, then silent: A hedges on B and runs r1 itself
    untilFallback(h, "A", forwardToB, 30_000);
    h.drop(forwardToB);
    h.finishRuns("A");
    expect(cancelsToB(h)).toMatchObject([{ msg: { reqId: "r1", attempt: 1, final: true } }]);
  });

  it("our own restart: the peer running our forward gets a final cancel and aborts it", () => {
    const h = setup();
    h.client("A", "r1", prompt(1, 1));
    h.deliver(isType("forward"));
    h.deliver(isType("forward-ack"));
    expect(runs(h, "B")).toBe(1);
    h.restart("A");
    expect(cancelsToB(h)).toMatchObject([{ msg: { reqId: "r1", attempt: 1, final: true } }]);
    h.deliver((m) => m.msg.type === "cancel");
    expect(h.endAborted("B")).toBe(1);
  });
});

describe("a streaming request's hedge", () => {
  it("ends with a final cancel as the local run starts: the peer's run is aborted", () => {
    const h = setup();
    h.client("A", "x1", prompt(7, 1)); // A busy: r1, back from B, waits in A's queue
    h.input("A", {
      type: "client-request",
      reqId: "r1",
      request: { id: "r1", tokens: prompt(1, 1), maxTokens: 1, stream: true },
    });
    h.deliver(forwardToB);
    h.deliver(isType("forward-ack"));
    expect(runs(h, "B")).toBe(1);
    // B acked and is silent since (its run never ends here): A gives it up and queues r1, asking
    // B again meanwhile (nothing of r1 streamed yet: B's answer would still be the reply).
    untilFallback(h, "A", forwardToB, 30_000);
    expect(h.node("A").queueDepth()).toBe(2);
    expect(cancelsToB(h)).toHaveLength(0);
    h.drop(forwardToB);
    h.finishRuns("A"); // x1 ends, r1 starts: B's answer can no longer be taken
    expect(runs(h, "A")).toBe(1);
    expect(h.repliesFor("r1")).toHaveLength(0);
    expect(cancelsToB(h)).toMatchObject([{ msg: { reqId: "r1", attempt: 1, final: true } }]);
    h.deliver((m) => m.msg.type === "cancel");
    expect(h.endAborted("B")).toBe(1);
    h.finishRuns("A");
    expect(h.repliesFor("r1")).toMatchObject([{ record: { servedBy: "A" } }]);
    expect(cancelsToB(h)).toHaveLength(0); // owed nothing more at the settle
  });
});

describe("gossip mode: a peer's restart", () => {
  /**
   * r1 (sampled: no hedge) acked by B, silent since: A moves on with a cancel that is not final and
   * queues r1 behind a job of its own (x1).
   */
  function sampledSilent(): Harness {
    const h = daemonGossip(["A", "B"], ACK_MS);
    h.client("A", "x1", prompt(7, 1));
    const request = { id: "r1", tokens: prompt(1, 1), maxTokens: 1, temperature: 0.7 };
    h.input("A", { type: "client-request", reqId: "r1", request });
    h.deliver(isType("forward"));
    h.deliver(isType("forward-ack"));
    untilFallback(h, "A", forwardToB, 30_000);
    expect(h.node("A").queueDepth()).toBe(2);
    expect(h.drop((m) => m.msg.type === "cancel")).toBe(1);
    return h;
  }

  it("an attempt its older incarnation acked is owed no final cancel: that incarnation is gone", () => {
    const h = sampledSilent();
    h.crash("B");
    h.advance(10);
    h.restart("B");
    h.deliverMesh(); // its new epoch reaches A
    h.finishRuns("A"); // x1 ends, r1 starts
    h.finishRuns("A");
    expect(h.repliesFor("r1")).toHaveLength(1);
    expect(cancelsToB(h)).toHaveLength(0);
  });

  it("without a restart the same attempt is owed one", () => {
    const h = sampledSilent();
    h.finishRuns("A"); // x1 ends, r1 starts
    expect(cancelsToB(h)).toMatchObject([{ msg: { reqId: "r1", attempt: 1, final: true } }]);
  });

  it("a hedge whose re-ask the new incarnation acked goes on past the restart: it holds the job", () => {
    const h = daemonGossip(["A", "B"], ACK_MS);
    answerLost(h, "r1", prompt(1, 1));
    untilFallback(h, "A", forwardToB, 10_000); // A hedges on B and runs r1 itself
    const ask = h.mailbox.find(forwardToB) as Mail;
    h.drop(forwardToB);
    h.crash("B");
    h.advance(10);
    h.restart("B");
    // The re-ask reaches B's new incarnation, whose ack (naming its epoch) reaches A before gossip does.
    const epoch = h.node("B").currentEpoch;
    const acked: Effect[] = h.input("A", {
      type: "peer-message",
      from: "B",
      msg: { type: "forward-ack", reqId: "r1", attempt: 1, epoch },
    });
    expect(acked.filter((e) => e.type === "send")).toHaveLength(0);
    h.deliverMesh(); // the restart reaches A
    h.input("B", { type: "peer-message", from: "A", msg: ask.msg });
    expect(runs(h, "B")).toBe(1);
    h.finishRuns("B");
    h.deliver(isType("result"));
    // The hedge still stood: B's answer is the reply, and A's own run is the one aborted.
    expect(h.repliesFor("r1")).toMatchObject([{ record: { servedBy: "B" } }]);
    expect(h.node("A").stats().hedgedAnswers).toBe(1);
  });
});

describe("the cancel effects", () => {
  const cancel = (to: string, reqId: string, attempt: number, final?: true): Effect => ({
    type: "send",
    to,
    msg: final ? { type: "cancel", reqId, attempt, final } : { type: "cancel", reqId, attempt },
  });

  it("owed: one per attempt not done whose peer is reachable, each once", () => {
    const p = {
      reqId: "r1",
      abandoned: [
        { to: "B", attempt: 1 },
        { to: "C", attempt: 2, done: true },
        { to: "D", attempt: 3 },
        { to: "B", attempt: 4 },
      ],
    };
    const out: Effect[] = [];
    owedCancels(p, (id) => id !== "D", out);
    expect(out).toEqual([cancel("B", "r1", 1, true), cancel("B", "r1", 4, true)]);
    owedCancels(p, () => true, out);
    expect(out).toEqual([cancel("B", "r1", 1, true), cancel("B", "r1", 4, true), cancel("D", "r1", 3, true)]);
  });

  it("a step's cancels: final once their request settled, one per peer and attempt, finality kept", () => {
    const tick: Effect = { type: "cancel-timer", timer: { kind: "poll" } };
    const out: Effect[] = [
      cancel("B", "r1", 1),
      tick,
      cancel("B", "r2", 1),
      cancel("B", "r2", 1, true),
      cancel("B", "r1", 1),
      cancel("C", "r1", 1),
    ];
    markFinalCancels(out, (id) => id === "r2");
    expect(out).toEqual([
      cancel("B", "r1", 1, true),
      tick,
      cancel("B", "r2", 1, true),
      cancel("C", "r1", 1, true),
    ]);
  });
});

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
