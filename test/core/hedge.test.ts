/**
 * Hedged local runs (hedge.ts), in the daemon's forward settings: a request whose peer acked it and
 * went silent runs here after its timed-out waits, and that peer is asked again meanwhile. Its answer
 * or the local run, whichever comes first, is the one reply.
 */
import { describe, expect, it } from "vitest";
import { HEDGE_ASKS } from "../../src/core/node/hedge.js";
import {
  answerLost,
  DAEMON_RECOVERY,
  type Harness,
  isType,
  type Mail,
  prompt,
  untilFallback,
  warmPair,
} from "./node-harness.js";

const ACK_MS = 250;

/** A, B as the daemon runs them; B holds topic 1, so A forwards r1 there. */
function setup(maxTimedOutAttempts = 2, perNode: (id: string) => object = () => ({})): Harness {
  const config = {
    ...DAEMON_RECOVERY,
    maxTimedOutAttempts,
    forwardAckTimeoutMs: ACK_MS,
    forwardTimeoutMs: 30_000,
  };
  return warmPair(config, perNode);
}

const toB = (m: Mail) => m.msg.type === "forward" && m.to === "B";

/**
 * r1 goes to B, is acked and run there; its answer, the probe for it and the probe's re-send are
 * lost, so A gives B up (2 timed-out waits) and runs r1 itself, uncached.
 */
function silentPeer(h = setup(), stream = false): Harness {
  const request = { id: "r1", tokens: prompt(1, 1), maxTokens: 1, ...(stream ? { stream } : {}) };
  h.input("A", { type: "client-request", reqId: "r1", request });
  h.deliver(isType("forward"));
  h.deliver(isType("forward-ack"));
  h.finishRuns("B");
  expect(h.drop(isType("result"))).toBe(1);
  for (let lost = 0; lost < 2; ) {
    h.advanceLive(10);
    lost += h.drop(toB);
    if (h.now > 10_000) throw new Error("no probe within 10 s");
  }
  for (let t = 0; h.node("A").stats().fallbacks === 0; t += 10) {
    if (t > 10_000) throw new Error("no fallback within 10 s");
    h.advanceLive(10);
  }
  expect(h.node("A").stats()).toMatchObject({ ackTimeouts: 1, fallbacks: 1 });
  return h;
}

const cancelToB = (m: Mail) => m.msg.type === "cancel" && m.to === "B";

/**
 * B is busy with a job of its own, so r1 (A's, acked by B) waits in B's queue; its answer goes
 * overdue and A runs r1 itself (timeouts never end the attempt here, only its answer deadline).
 */
function stalledPeer(temperature?: number): Harness {
  const h = setup(64);
  h.client("B", "b1", prompt(2, 1));
  expect(h.members.get("B")?.runs.size).toBe(1);
  const request = { id: "r1", tokens: prompt(1, 1), maxTokens: 1, ...(temperature ? { temperature } : {}) };
  h.input("A", { type: "client-request", reqId: "r1", request });
  h.deliver(isType("forward"));
  h.deliver(isType("forward-ack"));
  untilFallback(h, "A", toB, 30_000);
  expect(h.node("A").stats()).toMatchObject({ overdueAnswers: 1, fallbacks: 1 });
  expect(h.members.get("A")?.runs.size).toBe(1); // r1 runs at A
  return h;
}

describe("hedged local runs", () => {
  it("the silent peer is asked again at once; its kept answer is the reply, the local run goes unreplied", () => {
    const h = silentPeer();
    expect(h.members.get("A")?.runs.size).toBe(1); // r1 runs here
    expect(h.mailbox.filter(toB)).toHaveLength(1);
    h.deliver(toB);
    expect(h.node("B").stats().resentAnswers).toBe(1);
    h.deliver();
    expect(h.repliesFor("r1")).toHaveLength(1);
    expect(h.repliesFor("r1")[0]?.record).toMatchObject({ servedBy: "B" });
    // Counted once, as a hedged answer, not also as a late reply.
    expect(h.node("A").stats()).toMatchObject({ hedgedAnswers: 1, lateReplies: 0 });
    // The local run ends after the reply: no second one, and no more asking.
    h.finishRuns("A");
    h.advanceLive(10 * ACK_MS);
    expect(h.repliesFor("r1")).toHaveLength(1);
    expect(h.mailbox.filter(toB)).toHaveLength(0);
  });

  it("asks at most HEDGE_ASKS times, one ack timeout apart; the local run answers if all are lost", () => {
    const h = silentPeer();
    const asks: number[] = [];
    for (let t = 0; t < (HEDGE_ASKS + 3) * ACK_MS; t += 10) {
      if (h.drop(toB) > 0) asks.push(h.now);
      h.advanceLive(10);
    }
    expect(asks).toHaveLength(HEDGE_ASKS);
    for (let i = 1; i < asks.length; i++)
      expect((asks[i] as number) - (asks[i - 1] as number)).toBeGreaterThanOrEqual(ACK_MS);
    h.finishRuns("A");
    expect(h.repliesFor("r1")).toHaveLength(1);
    expect(h.repliesFor("r1")[0]?.record).toMatchObject({ servedBy: "A", fallbacks: 1 });
    expect(h.node("A").stats().hedgedAnswers).toBe(0);
  });

  it("a local run that ends first is the reply; the peer's answer after it is late, not a second reply", () => {
    const h = silentPeer();
    const ask = h.mailbox.find(toB) as Mail;
    h.drop((m) => m === ask);
    h.finishRuns("A");
    expect(h.repliesFor("r1")[0]?.record).toMatchObject({ servedBy: "A" });
    h.input("B", { type: "peer-message", from: "A", msg: ask.msg });
    h.deliver();
    h.advanceLive(10 * ACK_MS);
    expect(h.repliesFor("r1")).toHaveLength(1);
    expect(h.node("A").stats()).toMatchObject({ hedgedAnswers: 0, lateReplies: 1 });
    expect(h.mailbox.filter(toB)).toHaveLength(0); // no asking after the reply
  });

  it("a peer whose answer went overdue is asked again too, under its attempt's number", () => {
    // Timeouts never end B's attempt here: only its answer deadline does (overdue), then r1 runs here.
    const h = setup(64);
    answerLost(h, "r1", prompt(1, 1));
    untilFallback(h, "A", toB, 30_000);
    expect(h.node("A").stats()).toMatchObject({ overdueAnswers: 1, fallbacks: 1 });
    const ask = h.mailbox.find(toB);
    expect(ask?.msg).toMatchObject({ type: "forward", reqId: "r1", attempt: 1 });
    h.deliver(toB);
    h.deliver();
    expect(h.repliesFor("r1")).toHaveLength(1);
    expect(h.repliesFor("r1")[0]?.record).toMatchObject({ servedBy: "B" });
    expect(h.node("A").stats()).toMatchObject({ hedgedAnswers: 1, lateReplies: 0 });
  });

  it("a request refused here (queue full) is not hedged: nobody asks for an answer it no longer needs", () => {
    const h = silentPeer(
      (() => {
        const h0 = setup(2, (id) => (id === "A" ? { maxQueue: 1 } : {}));
        // A's engine busy and its one queue place taken, by prompts nobody caches.
        h0.client("A", "x1", prompt(7, 1));
        h0.client("A", "x2", prompt(7, 2));
        return h0;
      })(),
    );
    expect(h.repliesFor("r1")[0]?.outcome.ok).toBe(false);
    // The job the fallback left B (for a hedge that never came) is cancelled with the refusal.
    expect(h.mailbox.filter(cancelToB)).toHaveLength(1);
    h.advanceLive(3 * ACK_MS);
    expect(h.mailbox.filter(toB)).toHaveLength(0);
  });

  it("a peer that restarted is not asked again: its duplicate window is gone, it would run the job anew", () => {
    const h = silentPeer();
    expect(h.drop(toB)).toBe(1); // the first re-ask is lost
    h.crash("B");
    h.restart("B");
    h.gossip(3); // A learns of the restart
    h.advanceLive(4 * ACK_MS);
    expect(h.mailbox.filter(toB)).toHaveLength(0);
    expect(h.members.get("B")?.runs.size).toBe(0);
    h.finishRuns("A");
    expect(h.repliesFor("r1")[0]?.record).toMatchObject({ servedBy: "A" });
  });

  it("a peer that answers the re-ask with an error (it dropped the job) is not asked again", () => {
    const h = silentPeer();
    const ask = h.mailbox.find(toB) as Mail;
    h.drop((m) => m === ask);
    h.input("A", {
      type: "peer-message",
      from: "B",
      msg: { type: "error", reqId: "r1", attempt: 1, error: "cancelled by origin", retryable: false },
    });
    h.advanceLive(4 * ACK_MS);
    expect(h.mailbox.filter(toB)).toHaveLength(0);
  });

  it("a peer quarantined meanwhile is not asked again, and its answer to an earlier ask is not taken", () => {
    const h = silentPeer();
    const ask = h.mailbox.find(toB) as Mail;
    h.drop((m) => m === ask);
    // Spot checks caught B answering wrong (reached into here: the spot-check path is trust-kept.test.ts's).
    (
      h.node("A") as unknown as { origin: { trust: { quarantine(id: string): void } } }
    ).origin.trust.quarantine("B");
    h.input("B", { type: "peer-message", from: "A", msg: ask.msg }); // the earlier ask reaches B
    h.deliver(isType("result"));
    expect(h.repliesFor("r1")).toHaveLength(0);
    h.advanceLive(4 * ACK_MS);
    expect(h.mailbox.filter(toB)).toHaveLength(0);
    h.finishRuns("A");
    expect(h.repliesFor("r1")).toHaveLength(1);
    expect(h.repliesFor("r1")[0]?.record).toMatchObject({ servedBy: "A" });
    expect(h.node("A").stats().hedgedAnswers).toBe(0);
  });

  it("the fallback leaves the job queued at a stalled peer be: asked again, its answer comes first", () => {
    const h = stalledPeer();
    expect(h.mailbox.filter(cancelToB)).toHaveLength(0);
    h.deliver(toB); // the re-ask: B still holds r1, and acks it again
    h.finishRuns("B"); // b1 ends; r1 starts at B
    h.finishRuns("B");
    h.deliver();
    expect(h.node("B").stats().cancelledForwards).toBe(0);
    expect(h.repliesFor("r1")).toHaveLength(1);
    expect(h.repliesFor("r1")[0]?.record).toMatchObject({ servedBy: "B" });
    expect(h.node("A").stats().hedgedAnswers).toBe(1);
  });

  it("a local run that answers first cancels the peer's job it no longer needs", () => {
    const h = stalledPeer();
    h.drop(toB);
    h.finishRuns("A");
    expect(h.repliesFor("r1")[0]?.record).toMatchObject({ servedBy: "A" });
    expect(h.mailbox.filter(cancelToB).map((m) => m.msg)).toEqual([
      // Final: the request settled, so the peer may abort a run it started (abort-runs.ts).
      { type: "cancel", reqId: "r1", attempt: 1, final: true },
    ]);
    h.deliver(cancelToB);
    expect(h.node("B").stats().cancelledForwards).toBe(1);
    h.finishRuns("B"); // b1 ends: r1 is not run
    expect(h.members.get("B")?.runs.size).toBe(0);
  });

  it("a client that hangs up sends the cancel the fallback put off: the stalled peer drops the job", () => {
    const h = stalledPeer();
    h.drop(toB);
    expect(h.mailbox.filter(cancelToB)).toHaveLength(0);
    h.input("A", { type: "client-gone", reqId: "r1" });
    expect(h.mailbox.filter(cancelToB).map((m) => m.msg)).toEqual([
      // Final: the request settled, so the peer may abort a run it started (abort-runs.ts).
      { type: "cancel", reqId: "r1", attempt: 1, final: true },
    ]);
    h.deliver(cancelToB);
    expect(h.node("B").stats().cancelledForwards).toBe(1);
    h.finishRuns();
    h.finishRuns("B"); // b1 ends: r1 is not run at B
    expect(h.members.get("B")?.runs.size).toBe(0);
    h.deliver();
    h.advanceLive(4 * ACK_MS);
    expect(h.mailbox.filter(toB)).toHaveLength(0);
    expect(h.repliesFor("r1")).toHaveLength(0);
    expect(h.node("A").stats()).toMatchObject({ clientGoneRunning: 1, hedgedAnswers: 0 });
  });

  it("without a hedge (a sampled request) the fallback cancels the peer's job at once", () => {
    const h = stalledPeer(0.7);
    expect(h.mailbox.filter(cancelToB)).toHaveLength(1);
    expect(h.mailbox.filter(toB)).toHaveLength(0);
  });

  it("a quarantined peer's late answer does not take the request out of our queue either", () => {
    // A's engine busy with a prompt nobody caches: r1, back from B, waits in A's queue.
    const h = silentPeer(
      (() => {
        const h0 = setup();
        h0.client("A", "x1", prompt(7, 1));
        return h0;
      })(),
    );
    expect(h.members.get("A")?.runs.size).toBe(1); // x1 runs, r1 waits
    const ask = h.mailbox.find(toB) as Mail;
    h.drop((m) => m === ask);
    (
      h.node("A") as unknown as { origin: { trust: { quarantine(id: string): void } } }
    ).origin.trust.quarantine("B");
    h.input("B", { type: "peer-message", from: "A", msg: ask.msg });
    h.deliver(isType("result"));
    expect(h.repliesFor("r1")).toHaveLength(0);
    h.finishRuns("A"); // x1 ends, r1 starts here
    h.finishRuns("A");
    expect(h.repliesFor("r1")).toHaveLength(1);
    expect(h.repliesFor("r1")[0]?.record).toMatchObject({ servedBy: "A" });
  });

  it("a peer quarantined while it ran our forward: its answer is not taken, the request runs elsewhere", () => {
    const h = setup();
    h.client("A", "r1", prompt(1, 1));
    h.deliver(isType("forward"));
    h.deliver(isType("forward-ack"));
    h.finishRuns("B");
    (
      h.node("A") as unknown as { origin: { trust: { quarantine(id: string): void } } }
    ).origin.trust.quarantine("B");
    h.deliver(isType("result"));
    expect(h.repliesFor("r1")).toHaveLength(0);
    expect(h.node("A").stats()).toMatchObject({ fallbacks: 1 });
    h.finishRuns("A");
    expect(h.repliesFor("r1")).toHaveLength(1);
    expect(h.repliesFor("r1")[0]?.record).toMatchObject({ servedBy: "A", fallbacks: 1 });
  });

  describe("a streaming request (its client has our run's text already once that run starts)", () => {
    /** A busy with a prompt nobody caches, so r1 (streaming), back from B, waits in A's queue. */
    const queuedBehindX1 = () => {
      const h0 = setup();
      h0.client("A", "x1", prompt(7, 1));
      return silentPeer(h0, true);
    };

    it("its peer's answer while it still waits here is the reply (nothing streamed yet)", () => {
      const h = queuedBehindX1();
      h.deliver(toB);
      h.deliver();
      expect(h.repliesFor("r1")[0]?.record).toMatchObject({ servedBy: "B" });
    });

    it("once its run started, the peer's answer is not taken: that run answers", () => {
      const h = queuedBehindX1();
      const ask = h.mailbox.find(toB) as Mail;
      h.drop((m) => m === ask);
      h.finishRuns("A"); // x1 ends: r1 starts here
      h.input("B", { type: "peer-message", from: "A", msg: ask.msg });
      h.deliver(isType("result"));
      expect(h.repliesFor("r1")).toHaveLength(0);
      h.advanceLive(4 * ACK_MS);
      expect(h.mailbox.filter(toB)).toHaveLength(0); // no more asking
      h.finishRuns("A");
      expect(h.repliesFor("r1")).toHaveLength(1);
      expect(h.repliesFor("r1")[0]?.record).toMatchObject({ servedBy: "A" });
      expect(h.node("A").stats().hedgedAnswers).toBe(0);
    });

    it("a run that starts at once ends the hedge at once: the peer is not asked, its job cancelled", () => {
      const h = silentPeer(setup(), true);
      expect(h.members.get("A")?.runs.size).toBe(1);
      expect(h.mailbox.filter(toB)).toHaveLength(0);
      expect(h.mailbox.filter(cancelToB)).toHaveLength(1);
      h.finishRuns("A");
      expect(h.repliesFor("r1")[0]?.record).toMatchObject({ servedBy: "A" });
    });
  });
});
