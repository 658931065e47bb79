/**
 * Forward acks: the receiver of a forward acks it at once, so the origin falls back within about one
 * RTT (the ack timeout) when the forward, its ack or the peer is lost — not after the whole forward
 * timeout — and probes (re-sends the same forward) when an acked answer is overdue, which the receiver
 * answers without running the request twice.
 */
import { describe, expect, it } from "vitest";
import { DUPLICATE_HANDLED, FORWARD_CANCELLED } from "../../src/core/node/node.js";
import type { Effect, PeerMessage } from "../../src/core/node/types.js";
import { Harness, isType, type Mail, prompt } from "./node-harness.js";

function sentTypes(effects: Effect[]): string[] {
  return effects.flatMap((e) => (e.type === "send" ? [e.msg.type] : []));
}

/** The ack timeout's floor these tests run with (set explicitly: a new default must not move them). */
const ACK_FLOOR_MS = 250;

/** A, B; B holds topics 1-5 so A forwards their prompts to B. */
function setup(overrides = {}): Harness {
  const h = new Harness(["A", "B"], { forwardAckTimeoutMs: ACK_FLOOR_MS, ...overrides });
  for (let t = 1; t <= 5; t++) h.warm("B", `warm${t}`, prompt(t, 0));
  h.gossip(3);
  return h;
}

/** How long A waits for B's ack, as A computes it from its current RTT estimate of B. */
function ackMs(h: Harness): number {
  return h.node("A").ackTimeoutMs({ rttMs: h.node("A").peers()[0]?.rttMs });
}

describe("PrefixNode — forward acks", () => {
  it("acks an accepted forward at once with an ETA; refused or cancelled forwards get an error, no ack", () => {
    const h = setup();
    h.client("A", "r1", prompt(1, 1));
    const fwd = h.mailbox.find(isType("forward")) as Mail;
    h.drop((m) => m === fwd);
    const atB = h.input("B", { type: "peer-message", from: "A", msg: fwd.msg });
    // The ack leaves before the engine work starts.
    expect(atB.map((e) => (e.type === "send" ? e.msg.type : e.type))).toEqual(["forward-ack", "engine-run"]);
    const ack = atB[0];
    expect(ack?.type === "send" && ack.msg).toMatchObject({ type: "forward-ack", reqId: "r1", attempt: 1 });
    const eta = ack?.type === "send" && ack.msg.type === "forward-ack" ? ack.msg.etaMs : undefined;
    expect(eta).toBeGreaterThan(0);
    // Refused (hop limit): an error, no ack.
    const req = { id: "x", tokens: prompt(1, 2), maxTokens: 1 };
    const far = h.input("B", {
      type: "peer-message",
      from: "A",
      msg: { type: "forward", reqId: "x", attempt: 1, hops: 2, request: req },
    });
    expect(sentTypes(far)).toEqual(["error"]);
    // Dropped because its cancel overtook it: no ack, no run, one retryable error saying why.
    h.input("B", { type: "peer-message", from: "A", msg: { type: "cancel", reqId: "y", attempt: 1 } });
    const late = h.input("B", {
      type: "peer-message",
      from: "A",
      msg: { type: "forward", reqId: "y", attempt: 1, hops: 1, request: req },
    });
    expect(late).toEqual([
      {
        type: "send",
        to: "A",
        msg: { type: "error", reqId: "y", attempt: 1, error: FORWARD_CANCELLED, retryable: true },
      },
    ]);
  });

  it("a lost forward falls back after the ack timeout, not the forward timeout", () => {
    const h = setup({ forwardTimeoutMs: 30_000 });
    expect(ackMs(h)).toBe(ACK_FLOOR_MS); // the measured loopback RTT is far under the floor
    h.client("A", "r1", prompt(1, 1));
    expect(h.drop(isType("forward"))).toBe(1);
    h.advanceLive(ackMs(h) - 10);
    expect(h.members.get("A")?.runs.size).toBe(0); // still waiting
    h.advanceLive(20);
    expect(h.members.get("A")?.runs.size).toBe(1); // fell back to local
    expect(h.mailbox.filter(isType("cancel"))).toMatchObject([{ to: "B", msg: { reqId: "r1", attempt: 1 } }]);
    expect(h.node("A").stats().ackTimeouts).toBe(1);
    h.finishRuns("A");
    const replies = h.repliesFor("r1");
    expect(replies).toHaveLength(1);
    expect(replies[0]?.record.servedBy).toBe("A");
    expect(replies[0]?.record.fallbacks).toBe(1);
    expect(replies[0]?.record.totalMs).toBeLessThan(ackMs(h) + 50);
  });

  it("a lost ack counts like a lost forward; the peer's late answer is dropped (exactly once)", () => {
    const h = setup();
    h.client("A", "r1", prompt(1, 1));
    h.deliver(isType("forward"));
    expect(h.drop(isType("forward-ack"))).toBe(1);
    h.advanceLive(ackMs(h) + 10);
    expect(h.node("A").stats().ackTimeouts).toBe(1);
    h.deliver(isType("cancel")); // B already runs it: it finishes
    h.finishRuns();
    h.deliver();
    expect(h.repliesFor("r1")).toHaveLength(1);
    expect(h.node("A").stats().lateReplies).toBe(1);
  });

  it("without answer probes (the daemon): acks carry no ETA and answers are not kept to send again", () => {
    const h = setup({ answerProbes: false });
    h.client("A", "r1", prompt(1, 1));
    const fwd = h.mailbox.find(isType("forward")) as Mail;
    h.deliver(isType("forward"));
    const ack = h.mailbox.find(isType("forward-ack"));
    expect(ack?.msg).toEqual({ type: "forward-ack", reqId: "r1", attempt: 1 });
    h.deliver(isType("forward-ack"));
    h.finishRuns("B");
    const result = h.mailbox.find(isType("result"));
    expect(result).toBeDefined();
    // The same forward again (as a probe would send it): nothing kept, nothing re-sent, nothing rerun
    // — but the copy is told at once, so whatever waits on it (a transport stream) ends now.
    const again = h.input("B", { type: "peer-message", from: "A", msg: fwd.msg });
    expect(h.members.get("B")?.runs.size).toBe(0);
    expect(again).toEqual([
      {
        type: "send",
        to: "A",
        msg: { type: "error", reqId: "r1", attempt: 1, error: DUPLICATE_HANDLED, retryable: true },
      },
    ]);
    // A already has its answer: the error is a late reply, not a second answer or a fallback.
    h.deliver(isType("result"));
    h.input("A", { type: "peer-message", from: "B", msg: (again[0] as { msg: PeerMessage }).msg });
    expect(h.repliesFor("r1")).toHaveLength(1);
    expect(h.members.get("A")?.runs.size).toBe(0);
  });

  it("once acked, waits past the ack timeout; a lost result is recovered by a probe, not a rerun", () => {
    const h = setup();
    h.client("A", "r1", prompt(1, 1));
    h.deliver(isType("forward"));
    h.deliver(isType("forward-ack"));
    h.advanceLive(ackMs(h) + 50); // acked: no fallback at the ack timeout
    expect(h.node("A").stats().ackTimeouts).toBe(0);
    h.finishRuns("B");
    expect(h.drop(isType("result"))).toBe(1); // the answer is lost
    let probeAt = -1;
    for (let t = 0; t < 1_000 && probeAt < 0; t += 10) {
      h.advanceLive(10);
      if (h.mailbox.some(isType("forward"))) probeAt = h.now;
    }
    expect(probeAt).toBeGreaterThan(0);
    expect(h.node("A").stats()).toMatchObject({ probes: 1, resends: 0 });
    const probe = h.mailbox.find(isType("forward"));
    expect(probe?.msg).toMatchObject({ reqId: "r1", attempt: 1 }); // the same attempt again
    h.deliver(isType("forward"));
    expect(h.node("B").stats().resentAnswers).toBe(1);
    expect(h.members.get("B")?.runs.size).toBe(0); // not run again
    h.deliver();
    const replies = h.repliesFor("r1");
    expect(replies).toHaveLength(1);
    expect(replies[0]?.record.servedBy).toBe("B");
    expect(replies[0]?.record.fallbacks).toBe(0);
    expect(h.node("B").stats().servedForPeers).toBe(1);
    // The probe's wait is no round trip: the measured RTT is untouched.
    expect(h.node("A").peers()[0]?.rttMs).toBe(0);
  });

  it("a probe of a job still running is acked again; an unanswered probe falls back", () => {
    const h = setup({ forwardTimeoutMs: 30_000 });
    h.client("A", "r1", prompt(1, 1));
    h.deliver(isType("forward"));
    h.deliver(isType("forward-ack"));
    const probeTimes: number[] = [];
    const untilProbe = (): void => {
      for (let t = 0; t < 20_000; t += 10) {
        h.advanceLive(10);
        if (h.mailbox.some(isType("forward"))) {
          probeTimes.push(h.now);
          return;
        }
      }
    };
    untilProbe();
    const reack = h.mailbox.find(isType("forward")) as Mail;
    h.drop((m) => m === reack);
    const atB = h.input("B", { type: "peer-message", from: "A", msg: reack.msg });
    expect(sentTypes(atB)).toEqual(["forward-ack"]); // running: acked again, not rerun
    expect(atB.some((e) => e.type === "engine-run")).toBe(false);
    h.deliver(isType("forward-ack"));
    untilProbe();
    expect(probeTimes).toHaveLength(2);
    // The job is overdue (ETA 0 in the re-ack), yet the wait doubles per probe: 2 × the ack timeout.
    expect((probeTimes[1] as number) - (probeTimes[0] as number)).toBeGreaterThanOrEqual(2 * ackMs(h));
    // This probe is lost: after one more ack timeout the attempt is abandoned.
    expect(h.drop(isType("forward"))).toBe(1);
    h.advanceLive(ackMs(h) + 10);
    expect(h.node("A").stats().ackTimeouts).toBe(1);
    expect(h.mailbox.filter(isType("cancel"))).toHaveLength(1);
    h.finishRuns();
    h.deliver();
    expect(h.repliesFor("r1")).toHaveLength(1);
  });

  it("ignores duplicated acks and acks for unknown or finished requests", () => {
    const h = setup();
    h.client("A", "r1", prompt(1, 1));
    h.deliver(isType("forward"));
    const ack = h.mailbox.find(isType("forward-ack")) as Mail;
    h.deliver(isType("forward-ack"));
    const again = h.input("A", { type: "peer-message", from: "B", msg: ack.msg });
    expect(again).toEqual([]);
    expect(h.node("A").stats().ignoredAcks).toBe(1);
    const unknown: PeerMessage = { type: "forward-ack", reqId: "nope", attempt: 1, etaMs: 5 };
    expect(h.input("A", { type: "peer-message", from: "B", msg: unknown })).toEqual([]);
    h.finishRuns("B");
    h.deliver();
    expect(h.repliesFor("r1")).toHaveLength(1);
    // After the answer: ignored too, and nothing is answered twice.
    expect(h.input("A", { type: "peer-message", from: "B", msg: ack.msg })).toEqual([]);
    expect(h.node("A").stats().ignoredAcks).toBe(3);
    expect(h.repliesFor("r1")).toHaveLength(1);
    // Malformed: counted, ignored.
    const bad: PeerMessage = { type: "forward-ack", reqId: "x".repeat(600), attempt: 1 };
    expect(h.input("A", { type: "peer-message", from: "B", msg: bad })).toEqual([]);
    expect(h.node("A").stats().invalidMessages).toBe(1);
  });

  it("an ETA that is not a finite, non-negative number leaves only the forward timeout", () => {
    const h = setup();
    for (const [i, etaMs] of [Number.NaN, -5, Number.POSITIVE_INFINITY].entries()) {
      const reqId = `r${i}`;
      h.client("A", reqId, prompt(1 + i, 1));
      h.deliver(isType("forward"));
      h.drop(isType("forward-ack"));
      const eff = h.input("A", {
        type: "peer-message",
        from: "B",
        msg: { type: "forward-ack", reqId, attempt: 1, etaMs },
      });
      expect(eff).toEqual([{ type: "cancel-timer", timer: { kind: "ack", reqId, attempt: 1 } }]);
    }
  });

  it("stops requiring acks from a peer that answers but never acks, until it acks", () => {
    const h = setup({ forwardTimeoutMs: 30_000 });
    const peerB = () => h.node("A").peers()[0];
    for (let t = 1; t <= 3; t++) {
      expect(peerB()?.acksForwards).toBe(true);
      h.client("A", `old${t}`, prompt(t, 1));
      h.deliver(isType("forward"));
      h.drop(isType("forward-ack")); // an older peer sends none
      h.advanceLive(ackMs(h) + 10); // → local
      h.drop(isType("cancel")); // an older peer may ignore it, too
      h.finishRuns();
      h.deliver(); // B's answer arrives late
      expect(h.repliesFor(`old${t}`)).toHaveLength(1);
    }
    expect(peerB()?.acksForwards).toBe(false);
    expect(h.node("A").stats().ackTimeouts).toBe(3);
    // Now forwards to B wait for the answer as before acks existed.
    h.client("A", "r4", prompt(4, 1));
    h.deliver(isType("forward"));
    h.drop(isType("forward-ack"));
    h.advanceLive(1_000);
    expect(h.node("A").stats().ackTimeouts).toBe(3);
    h.finishRuns("B");
    h.deliver();
    expect(h.repliesFor("r4")[0]?.record.servedBy).toBe("B");
    // Any ack from it (e.g. after an upgrade) makes acks required again.
    h.client("A", "r5", prompt(5, 1));
    h.deliver(isType("forward"));
    h.deliver(isType("forward-ack"));
    expect(peerB()?.acksForwards).toBe(true);
  });

  it("re-sends an unacked forward forwardResends times, then abandons it", () => {
    const h = setup({ forwardTimeoutMs: 30_000, forwardResends: 1 });
    h.client("A", "r1", prompt(1, 1));
    expect(h.drop(isType("forward"))).toBe(1);
    h.advanceLive(ackMs(h) + 10); // the ack timeout: one re-send of the same attempt, no fallback yet
    expect(h.mailbox.filter(isType("forward"))).toMatchObject([
      { to: "B", msg: { reqId: "r1", attempt: 1 } },
    ]);
    // Never acked: a re-send, not a probe (a probe asks for an answer the peer owes).
    expect(h.node("A").stats()).toMatchObject({ resends: 1, probes: 0, ackTimeouts: 0, fallbacks: 0 });
    expect(h.drop(isType("forward"))).toBe(1);
    h.advanceLive(ackMs(h) + 10);
    expect(h.node("A").stats()).toMatchObject({ resends: 1, probes: 0, ackTimeouts: 1, fallbacks: 1 });
    expect(h.members.get("A")?.runs.size).toBe(1); // fell back to local
  });

  it("an acked attempt abandoned after a lost probe does not count against the peer's acks", () => {
    // With a re-send allowed, the probe counter no longer tells whether the attempt was ever acked.
    const h = setup({ forwardTimeoutMs: 30_000, forwardResends: 1 });
    for (let t = 1; t <= 3; t++) h.client("A", `r${t}`, prompt(t, 1));
    h.deliver(isType("forward"));
    h.deliver(isType("forward-ack"));
    // B holds the jobs; every probe (and then every cancel) from A is lost, until A gives up on all three.
    for (let t = 0; t < 30_000 && h.node("A").stats().ackTimeouts < 3; t += 10) {
      h.advanceLive(10);
      h.drop((m) => m.msg.type === "forward" || m.msg.type === "cancel");
    }
    expect(h.node("A").stats().ackTimeouts).toBe(3);
    for (let i = 0; i < 4; i++) {
      h.finishRuns();
      h.deliver();
    }
    expect(h.node("A").stats().lateReplies).toBe(3); // B's three answers, after A moved on
    expect(h.node("A").peers()[0]?.acksForwards).toBe(true);
  });

  it("an ack timeout as long as the forward timeout turns the ack wait off", () => {
    const h = setup({ forwardTimeoutMs: 1_000, forwardAckTimeoutMs: 1_000 });
    const eff = h.client("A", "r1", prompt(1, 1));
    expect(eff.some((e) => e.type === "set-timer" && e.timer.kind === "ack")).toBe(false);
    h.drop(isType("forward"));
    h.advanceLive(990);
    expect(h.members.get("A")?.runs.size).toBe(0);
    h.advanceLive(20);
    expect(h.members.get("A")?.runs.size).toBe(1);
    expect(h.node("A").stats().ackTimeouts).toBe(0);
  });

  it("the ack timeout is max(floor, 4 × RTT), the RTT prior until measured, at most the forward timeout", () => {
    const h = new Harness(["A", "B"], { forwardTimeoutMs: 5_000, forwardAckTimeoutMs: 300 });
    const a = h.node("A");
    expect(a.ackTimeoutMs({ rttMs: 2 })).toBe(300);
    expect(a.ackTimeoutMs({ rttMs: 200 })).toBe(800);
    expect(a.ackTimeoutMs({ rttMs: 2_000 })).toBe(5_000);
    expect(a.ackTimeoutMs({ rttMs: undefined })).toBe(1_000); // 4 × the 250 ms prior
  });

  it("a forward's timeout covers the request's own run: a long generation is not given up mid-run", () => {
    const h = new Harness(["A", "B"], { forwardAckTimeoutMs: ACK_FLOOR_MS, forwardTimeoutMs: 30_000 });
    // A times one run of its own (5 ms per output token in the sim profile); B holds topic 1.
    h.warm("A", "own", prompt(9, 0));
    h.warm("B", "warm1", prompt(1, 0));
    h.gossip(3);
    const forwardDelay = (eff: Effect[]) =>
      eff.flatMap((e) => (e.type === "set-timer" && e.timer.kind === "forward" ? [e.delayMs] : []));
    // A short request keeps the configured timeout exactly.
    expect(forwardDelay(h.client("A", "short", prompt(1, 1)))).toEqual([30_000]);
    h.deliver();
    h.finishRuns("B");
    h.deliver();
    expect(h.repliesFor("short")[0]?.record.servedBy).toBe("B");
    // 20,000 output tokens decode for about 100 s: a 30 s timeout would fall back mid-run and run it
    // again here; the wait is what peer trust allows that run (3 × run + 1 s).
    const [long] = forwardDelay(h.client("A", "long", prompt(1, 2), 20_000));
    expect(long).toBeGreaterThanOrEqual(3 * 20_000 * 5 + 1_000);
    expect(long).toBeLessThan(3_600_001);
    for (let t = 0; t < 60_000; t += 100) {
      h.deliver(); // B's ack, probes and their answers, snapshots
      h.advance(100);
    }
    expect(h.members.get("A")?.runs.size).toBe(0); // still waiting for B, not running it twice
    expect(h.node("A").stats().fallbacks).toBe(0);
    h.finishRuns("B");
    h.deliver();
    expect(h.repliesFor("long")[0]?.record.servedBy).toBe("B");
  });

  it("a long run's own timeout bounds its attempt: the peer's budget, the ETA and the ack wait", () => {
    const h = new Harness(["A", "B"], { forwardAckTimeoutMs: ACK_FLOOR_MS, forwardTimeoutMs: 30_000 });
    h.warm("A", "own", prompt(9, 0));
    h.warm("B", "warm1", prompt(1, 0));
    h.gossip(3);
    const eff = h.client("A", "long", prompt(1, 2), 20_000);
    const timeoutMs = eff.flatMap((e) =>
      e.type === "set-timer" && e.timer.kind === "forward" ? [e.delayMs] : [],
    )[0] as number;
    expect(timeoutMs).toBeGreaterThan(30_000);
    // The budget B is told is what A waits for this request (less the round trip), not the configured
    // 30 s: B would otherwise refuse the run, or drop it from its queue, while A still waits for it.
    const forward = h.mailbox.find(isType("forward"))?.msg;
    const budget = forward?.type === "forward" ? (forward.deadlineMs ?? 0) : 0;
    expect(budget).toBeGreaterThan(30_000);
    expect(budget).toBeLessThanOrEqual(timeoutMs);
    h.deliver(isType("forward"));
    h.drop(isType("forward-ack"));
    // An ETA beyond the configured timeout but within the request's own is believed: the probe waits
    // for twice it (plus an ack timeout), not for the configured 30 s.
    const etaMs = 50_000;
    const acked = h.input("A", {
      type: "peer-message",
      from: "B",
      msg: { type: "forward-ack", reqId: "long", attempt: 1, etaMs },
    });
    const ackWait = acked.flatMap((e) =>
      e.type === "set-timer" && e.timer.kind === "ack" ? [e.delayMs] : [],
    );
    expect(ackWait).toEqual([Math.min(timeoutMs, 2 * etaMs + ackMs(h))]);
    for (let t = 0; t < 60_000; t += 100) {
      h.deliver(isType("forward-ack"));
      h.advance(100);
    }
    expect(h.node("A").stats().probes).toBe(0);
  });
});
