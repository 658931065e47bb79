/**
 * Final cancels owed (abort-runs.ts `owedCancels`), hand-driven in the daemon's forward settings: a
 * request that moved on from a peer with a cancel that was not final (its late answer could still
 * answer it) sends that peer a final one once no answer of it can be taken (the request runs here,
 * or settled), so the peer aborts the run nobody takes any more; none to a peer that answered, or
 * twice. Our own restart cancels finally too, and a streaming hedge's cancel is final once the local
 * run started.
 */
import { describe, expect, it } from "vitest";
import { ackToA, cancelsToB, forwardToB, runs, setup, to, twoHolders } from "./final-cancels-harness.js";
import { answerLost, type Harness, isType, prompt, untilFallback } from "./node-harness.js";

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
