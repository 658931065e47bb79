/**
 * The final-cancel tests' set-ups (abort-runs.ts `owedCancels`), hand-driven in the daemon's forward
 * settings, and the mail filters they read A's sends with.
 */
import { DAEMON_RECOVERY, Harness, isType, type Mail, prompt, warmPair } from "./node-harness.js";

export const ACK_MS = 250;

/** A, B as the daemon runs them; B holds topic 1, so A forwards there. */
export function setup(): Harness {
  return warmPair({
    ...DAEMON_RECOVERY,
    forwardAckTimeoutMs: ACK_MS,
    forwardTimeoutMs: 5_000,
    abortRuns: true,
  });
}

export const runs = (h: Harness, id: string) => h.members.get(id)?.runs.size ?? 0;
export const cancelsToB = (h: Harness) => h.mailbox.filter((m) => m.to === "B" && m.msg.type === "cancel");
export const forwardToB = (m: Mail) => m.to === "B" && m.msg.type === "forward";

export const to = (id: string, type: string) => (m: Mail) => m.to === id && m.msg.type === type;

/**
 * A, B and C, both B and C holding topic 1 and no cap on timed-out waits (r1 tries every peer before
 * running here); A's client request r1 sent to one of them (`first`), the other is `second`.
 */
export function twoHolders(): { h: Harness; first: string; second: string } {
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
export const ackToA = (m: Mail) => m.to === "A" && m.msg.type === "forward-ack";
