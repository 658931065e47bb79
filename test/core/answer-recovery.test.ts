/**
 * Answer recovery and the cap on timed-out attempts (config `answerRecovery`, `maxTimedOutAttempts`;
 * both on in the daemon's configuration): without ETAs in acks, an origin asks for an acked
 * forward's answer soon after its own estimate of it, the peer sends its kept answer again without
 * running the request twice, and a request that lost attempts to timeouts runs here ahead of the
 * queue (behind those admitted, under a wait bound), never offloaded again.
 */
import { describe, expect, it } from "vitest";
import { DAEMON_NODE_DEFAULTS, resolveNodeConfig } from "../../src/core/node/config.js";
import { Executor } from "../../src/core/node/executor.js";
import { PAPER_H100_QWEN05B } from "../../src/engines/sim/profiles.js";
import { calibrationSamples } from "../../src/sim/calibration.js";
import { answerLost, DAEMON_RECOVERY, Harness, isType, type Mail, prompt } from "./node-harness.js";

/** The ack timeout's floor these tests run with (set explicitly: a new default must not move them). */
const ACK_MS = 250;

/** A, B as the daemon runs them (no ETA in acks, peer trust); B holds topics 1-5, so A forwards them. */
function setup(overrides = {}): Harness {
  const h = new Harness(["A", "B"], {
    ...DAEMON_RECOVERY,
    forwardAckTimeoutMs: ACK_MS,
    forwardTimeoutMs: 30_000,
    ...overrides,
  });
  for (let t = 1; t <= 5; t++) h.warm("B", `warm${t}`, prompt(t, 0));
  h.gossip(3);
  return h;
}

/** Advances in small steps until A sends a forward (a probe); its time, or -1 within `limitMs`. */
function untilForward(h: Harness, limitMs: number): number {
  for (let t = 0; t < limitMs; t += 10) {
    h.advanceLive(10);
    if (h.mailbox.some(isType("forward"))) return h.now;
  }
  return -1;
}

describe("answer recovery (the daemon's configuration)", () => {
  it("is on in the daemon's configuration, off in the core's defaults", () => {
    expect(DAEMON_NODE_DEFAULTS).toMatchObject({ answerRecovery: true, maxTimedOutAttempts: 2 });
    const h = new Harness(["A", "B"], {});
    expect(h.node("A").config).toMatchObject({ answerRecovery: false, maxTimedOutAttempts: 0 });
  });

  it("asks for a lost answer soon after its expected time; the peer re-sends it, no second run", () => {
    const h = setup();
    h.client("A", "r1", prompt(1, 1));
    const sentAt = h.now;
    h.deliver(isType("forward"));
    const ack = h.mailbox.find(isType("forward-ack"));
    expect(ack?.msg).toEqual({ type: "forward-ack", reqId: "r1", attempt: 1 }); // no ETA
    h.deliver(isType("forward-ack"));
    h.finishRuns("B");
    expect(h.drop(isType("result"))).toBe(1); // the answer is lost
    const probeAt = untilForward(h, 10_000);
    expect(probeAt).toBeGreaterThan(0);
    // Within our estimate plus half an ack timeout, and never more than 4 ack timeouts after the forward.
    expect(probeAt - sentAt).toBeLessThanOrEqual(4 * ACK_MS + 10);
    expect(h.mailbox.find(isType("forward"))?.msg).toMatchObject({ reqId: "r1", attempt: 1 });
    h.deliver(isType("forward"));
    expect(h.node("B").stats().resentAnswers).toBe(1);
    expect(h.members.get("B")?.runs.size).toBe(0); // not run again
    h.deliver();
    const replies = h.repliesFor("r1");
    expect(replies).toHaveLength(1);
    expect(replies[0]?.record).toMatchObject({ servedBy: "B", fallbacks: 0 });
    expect(h.node("B").stats().servedForPeers).toBe(1);
    expect(h.node("A").stats()).toMatchObject({ overdueAnswers: 0, ackTimeouts: 0 });
  });

  it("keeps asking while the peer acks again (its job still waits), at most 4 ack timeouts apart", () => {
    const h = setup();
    h.client("A", "r1", prompt(1, 1));
    h.deliver(isType("forward"));
    h.deliver(isType("forward-ack"));
    const times: number[] = [];
    for (let i = 0; i < 3; i++) {
      const at = untilForward(h, 10_000);
      expect(at).toBeGreaterThan(0);
      times.push(at);
      const probe = h.mailbox.find(isType("forward")) as Mail;
      h.drop((m) => m === probe);
      h.input("B", { type: "peer-message", from: "A", msg: probe.msg });
      expect(h.members.get("B")?.runs.size).toBe(1); // the one run, still going
      h.deliver(isType("forward-ack"));
    }
    for (let i = 1; i < times.length; i++)
      expect((times[i] as number) - (times[i - 1] as number)).toBeLessThanOrEqual(4 * ACK_MS + 10);
    h.finishRuns("B");
    h.deliver();
    expect(h.repliesFor("r1")).toHaveLength(1);
  });

  it("an unanswered probe is sent again, not abandoned at once", () => {
    const h = setup();
    answerLost(h, "r1", prompt(1, 1));
    expect(untilForward(h, 10_000)).toBeGreaterThan(0);
    expect(h.drop(isType("forward"))).toBe(1); // the probe is lost too
    expect(untilForward(h, ACK_MS + 20)).toBeGreaterThan(0); // asked again after one ack timeout
    h.deliver(isType("forward"));
    h.deliver();
    const replies = h.repliesFor("r1");
    expect(replies).toHaveLength(1);
    expect(replies[0]?.record).toMatchObject({ servedBy: "B", fallbacks: 0 });
    expect(h.node("B").stats().servedForPeers).toBe(1);
  });

  it("with a wait bound, a request back from a timed-out attempt queues behind those admitted", () => {
    const h = setup({ maxTimedOutAttempts: 1, offload: true, maxWaitMs: 30_000 });
    for (let i = 0; i < 3; i++) h.client("A", `local${i}`, prompt(20 + i, 1));
    h.client("A", "r1", prompt(1, 1));
    expect(h.drop(isType("forward"))).toBe(1); // the forward is lost
    // local3 arrives after r1: without a bound r1 would go ahead of it (by arrival).
    h.advanceLive(10);
    h.client("A", "local3", prompt(23, 1));
    h.advanceLive(ACK_MS + 20);
    expect(h.node("A").stats()).toMatchObject({ ackTimeouts: 1, fallbacks: 1 });
    // Going ahead of local3 would delay it past the start it was promised within the bound.
    for (let i = 0; i < 5; i++) h.finishRuns("A");
    const answered = h.replies.map((r) => r.reqId).filter((id) => !id.startsWith("warm"));
    expect(answered).toEqual(["local0", "local1", "local2", "local3", "r1"]);
  });

  it("a request that stays in line is never offered to offload (it would only come back)", () => {
    const config = resolveNodeConfig({ id: "A", peers: [], capacityTokens: 100_000, maxWaitMs: 30_000 });
    const ex = new Executor(config, "A", true);
    ex.calibrate(calibrationSamples(PAPER_H100_QWEN05B));
    const job = (reqId: string, stays?: boolean) => ({
      kind: "client" as const,
      reqId,
      from: undefined,
      attempt: 1,
      request: { id: reqId, tokens: prompt(1, reqId.length), maxTokens: 1 },
      ...(stays ? { stays } : {}),
    });
    for (const j of [job("run"), job("a"), job("bb", true), job("ccc")]) ex.enqueue(j, 0, []);
    expect(ex.waitingClients(0, 8).map((w) => w.reqId)).toEqual(["ccc", "a"]);
  });

  it("after a timed-out attempt the request runs here ahead of what arrived after it", () => {
    // maxTimedOutAttempts 1: the first timeout ends the peer attempts.
    const h = setup({ maxTimedOutAttempts: 1, offload: true });
    // A's own queue: requests for topics B does not hold (A runs them), two waiting behind one running.
    for (let i = 0; i < 3; i++) h.client("A", `local${i}`, prompt(20 + i, 1));
    expect(h.members.get("A")?.runs.size).toBe(1);
    h.client("A", "r1", prompt(1, 1));
    expect(h.drop(isType("forward"))).toBe(1); // the forward is lost
    h.advanceLive(10);
    h.client("A", "local3", prompt(23, 1)); // arrives after r1
    h.advanceLive(ACK_MS + 20);
    expect(h.node("A").stats()).toMatchObject({ ackTimeouts: 1, fallbacks: 1 });
    expect(h.mailbox.filter(isType("forward"))).toHaveLength(0); // no other peer: it stays here
    // r1 runs behind local1 and local2, which queued before it arrived, and ahead of local3, which
    // queued while its forward waited (at the head, a burst of such requests starved older ones).
    const answered = () => h.replies.map((r) => r.reqId).filter((id) => !id.startsWith("warm"));
    for (let i = 0; i < 5; i++) h.finishRuns("A");
    expect(answered()).toEqual(["local0", "local1", "local2", "r1", "local3"]);
    expect(h.repliesFor("r1")[0]?.record).toMatchObject({ servedBy: "A", fallbacks: 1 });
  });

  it("with the cap, a request stops trying peers after that many timeouts", () => {
    const lostOnce = (cap: number): Harness => {
      const h = new Harness(["A", "B", "C"], {
        answerProbes: false,
        peerTrust: true,
        answerRecovery: true,
        maxTimedOutAttempts: cap,
        forwardAckTimeoutMs: ACK_MS,
        forwardTimeoutMs: 30_000,
      });
      // B and C both hold topic 1: A plans both before itself.
      h.warm("B", "warmB", prompt(1, 0));
      h.warm("C", "warmC", prompt(1, 0));
      h.gossip(3);
      h.client("A", "r1", prompt(1, 1));
      expect(h.drop(isType("forward"))).toBe(1); // the first forward is lost
      h.advanceLive(ACK_MS + 20);
      return h;
    };
    // Cap 2: one timeout leaves another try (the forward sent once more to the same peer).
    expect(lostOnce(2).mailbox.filter(isType("forward"))).toHaveLength(1);
    // Cap 1: it runs here.
    const h = lostOnce(1);
    expect(h.mailbox.filter(isType("forward"))).toHaveLength(0);
    h.finishRuns("A");
    expect(h.repliesFor("r1")[0]?.record).toMatchObject({ servedBy: "A", fallbacks: 1 });
  });
});
