/**
 * What the late-answer tests share: A and B in the daemon's forward settings, and A's client request
 * forwarded to B, which streams output past (or within) the attempt's first answer deadline
 * (forward-acks.ts `pastFirstDeadline`) before it ends, however it ends.
 */
import { expect } from "vitest";
import { DAEMON_RECOVERY, forwardsIn, type Harness, isType, prompt, warmPair } from "./node-harness.js";

/** Failures that open a breaker (the default, as the daemon runs it). */
export const FAILURES = 3;
/** Far past the first answer deadline of a small request (streamed-output.test.ts measures ~1 s). */
export const LATE_MS = 8_000;
/** Well within it. */
export const ON_TIME_MS = 200;

export function latePair(): Harness {
  return warmPair({
    ...DAEMON_RECOVERY,
    trustMaxUnanswered: 3,
    forwardAckTimeoutMs: 250,
    forwardTimeoutMs: 30_000,
  });
}

export const trustOfB = (h: Harness) => h.node("A").peers()[0]?.trust;

/**
 * A's client request `reqId` (topic 1, question `q`) goes to B, which acks it and streams output every
 * 100 ms (unless not `streams`) for `ms`, forwards and acks delivered meanwhile. False if A did not
 * forward it to B.
 */
export function streamFromB(h: Harness, reqId: string, q: number, ms: number, streams = true): boolean {
  if (forwardsIn(h.client("A", reqId, prompt(1, q), 64)).length === 0) return false;
  h.deliver(isType("forward"));
  h.deliver(isType("forward-ack"));
  expect(h.members.get("B")?.runs.size).toBe(1);
  for (let t = 0; t < ms; t += 10) {
    if (streams && t % 100 === 0) h.input("A", { type: "forward-output", reqId, from: "B" });
    h.advanceLive(10);
    h.deliver((m) => m.msg.type === "forward" || m.msg.type === "forward-ack");
  }
  return true;
}
