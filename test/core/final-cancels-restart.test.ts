/**
 * Final cancels across a peer's restart in gossip mode: none owed to an incarnation known gone, one
 * without the restart, and a hedge keeps the newest epoch its peer acked in.
 */
import { describe, expect, it } from "vitest";
import type { Effect } from "../../src/core/node/types.js";
import { ACK_MS, cancelsToB, forwardToB, runs } from "./final-cancels-harness.js";
import {
  answerLost,
  daemonGossip,
  type Harness,
  isType,
  type Mail,
  prompt,
  untilFallback,
} from "./node-harness.js";

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
