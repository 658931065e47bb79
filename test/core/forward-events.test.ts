/**
 * The origin's counts of how a forward attempt ended without its answer, hand-driven: one that waited
 * out the whole forward timeout (`forwardTimeouts`), and one its peer ended with an error held against
 * it (`peerErrors`) — a refusal for load is neither.
 */
import { describe, expect, it } from "vitest";
import { forwardsIn, Harness, prompt } from "./node-harness.js";

const FORWARD_TIMEOUT_MS = 2_000;

/** A and B; B holds topic 1, so A forwards its prompts to B. Acks off: only the timeout bounds a wait. */
function setup(): Harness {
  const h = new Harness(["A", "B"], {
    peerTrust: true,
    answerProbes: false,
    forwardTimeoutMs: FORWARD_TIMEOUT_MS,
    forwardAckTimeoutMs: FORWARD_TIMEOUT_MS,
  });
  h.warm("B", "warm1", prompt(1, 0));
  h.gossip(3);
  return h;
}

/** Sends r1 from A to B and returns the attempt the forward carries (B gets nothing). */
function forwardHeld(h: Harness): number {
  expect(forwardsIn(h.client("A", "r1", prompt(1, 5)))).toEqual(["B"]);
  const fwd = h.mailbox.find((m) => m.to === "B" && m.msg.type === "forward");
  h.drop((m) => m === fwd);
  return fwd?.msg.type === "forward" ? fwd.msg.attempt : -1;
}

const errorFromB = (h: Harness, attempt: number, error: string) =>
  h.input("A", {
    type: "peer-message",
    from: "B",
    msg: { type: "error", reqId: "r1", attempt, error, retryable: true },
  });

describe("forward events: how an attempt ended without its answer", () => {
  it("a forward never answered falls back at the forward timeout, counted as such", () => {
    const h = setup();
    forwardHeld(h);
    // Live meanwhile (gossip delivered): the peer is not taken for down, only silent about r1.
    h.advanceLive(FORWARD_TIMEOUT_MS - 10);
    expect(h.node("A").stats()).toMatchObject({ forwardTimeouts: 0, fallbacks: 0 });
    h.advanceLive(20);
    expect(h.node("A").stats()).toMatchObject({ forwardTimeouts: 1, fallbacks: 1, peerErrors: 0 });
  });

  it("an error held against the peer counts; a refusal for load does not", () => {
    const h = setup();
    const failed = errorFromB(h, forwardHeld(h), "engine failed: out of memory");
    expect(failed.some((e) => e.type === "engine-run")).toBe(true); // fell back: runs here
    expect(h.node("A").stats()).toMatchObject({ peerErrors: 1, forwardTimeouts: 0, fallbacks: 1 });

    const g = setup();
    errorFromB(g, forwardHeld(g), "overloaded: queue full");
    expect(g.node("A").stats()).toMatchObject({ peerErrors: 0, forwardTimeouts: 0, fallbacks: 1 });
  });
});
