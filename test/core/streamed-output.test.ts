/**
 * A forward whose output streams in (`forward-output`, forward-acks.ts `streamed`): in the daemon's
 * forward settings, a peer still at work on an answer is never given up as overdue, however far its
 * run outlasts our estimate; one that stops streaming is, a window after its latest output.
 */
import { expect, it } from "vitest";
import { DAEMON_RECOVERY, type Harness, isType, prompt, warmPair } from "./node-harness.js";

const ACK_MS = 250;

/**
 * A forwards r1 to B, which acks and runs it without end; every `everyMs` (if given), output of r1
 * streams in at A from `from`, for `forMs` or until A falls back. Probes reach B; their acks come
 * back unless `lateAcks` (B acks so late under load that every later ack is lost to the wait).
 */
function slowRunAtB(forMs: number, everyMs?: number, from = "B", lateAcks = false): Harness {
  const h = warmPair({
    ...DAEMON_RECOVERY,
    maxTimedOutAttempts: 2,
    forwardAckTimeoutMs: ACK_MS,
    forwardTimeoutMs: 600_000,
  });
  h.client("A", "r1", prompt(1, 1), 64);
  h.deliver(isType("forward"));
  h.deliver(isType("forward-ack"));
  expect(h.members.get("B")?.runs.size).toBe(1);
  for (let t = 0; t < forMs && h.node("A").stats().fallbacks === 0; t += 10) {
    if (everyMs !== undefined && t % everyMs === 0)
      h.input("A", { type: "forward-output", reqId: "r1", from });
    h.advanceLive(10);
    h.deliver(isType("forward"));
    if (lateAcks) h.drop(isType("forward-ack"));
    else h.deliver(isType("forward-ack"));
  }
  return h;
}

/** When A gave r1's answer up as overdue with no output from B (the window output is held to). */
function overdueAfterMs(): number {
  const h = slowRunAtB(300_000);
  expect(h.node("A").stats()).toMatchObject({ overdueAnswers: 1, fallbacks: 1 });
  return h.now;
}

it("a peer streaming its answer is not overdue while its output comes, and is once it stops", () => {
  const started = warmPair(DAEMON_RECOVERY).now;
  const window = overdueAfterMs() - started;
  const h = slowRunAtB(10 * window, 100);
  expect(h.node("A").stats()).toMatchObject({ overdueAnswers: 0, fallbacks: 0 });
  // The output stops: overdue within a window of the last, not at once.
  const quiet = h.now;
  while (h.node("A").stats().fallbacks === 0 && h.now - quiet < 10 * window) {
    h.advanceLive(10);
    h.deliver((m) => m.msg.type === "forward" || m.msg.type === "forward-ack");
  }
  expect(h.node("A").stats()).toMatchObject({ overdueAnswers: 1, fallbacks: 1 });
  expect(h.now - quiet).toBeGreaterThan(window / 2);
  expect(h.now - quiet).toBeLessThanOrEqual(window + 100);
});

it("output from a node the attempt is not at keeps nothing alive", () => {
  const started = warmPair(DAEMON_RECOVERY).now;
  const window = overdueAfterMs() - started;
  const h = slowRunAtB(10 * window, 100, "C");
  expect(h.node("A").stats()).toMatchObject({ overdueAnswers: 1, fallbacks: 1 });
  expect(h.now - started).toBeLessThanOrEqual(window + 10);
});

it("output since a probe stands for its late ack: no timed-out waits, probes backing off as acked", () => {
  const window = overdueAfterMs() - warmPair(DAEMON_RECOVERY).now;
  const forMs = 10 * window;
  const h = slowRunAtB(forMs, 100, "B", true);
  expect(h.node("A").stats()).toMatchObject({ fallbacks: 0, ackTimeouts: 0, overdueAnswers: 0 });
  // As a peer that acks: a probe at most every 4 ack waits, not one at every ack wait.
  expect(h.node("A").stats().probes).toBeLessThanOrEqual(Math.ceil(forMs / (4 * ACK_MS)) + 4);
  // Without output, the same late acks are two timed-out waits, and A gives B up.
  const quiet = slowRunAtB(forMs, undefined, "B", true);
  expect(quiet.node("A").stats()).toMatchObject({ fallbacks: 1, ackTimeouts: 1 });
});
