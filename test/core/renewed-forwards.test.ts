/**
 * A peer removed and added back (DNS) whose first snapshot back shows a newer epoch than it left in
 * (anti-entropy `renewed`) restarted while out — or after we forwarded to it again, before its first
 * snapshot came: then the forwards its old process acked went with it, and fall back at once, as a
 * restart seen any other way makes them, not after the whole forward timeout.
 */
import { describe, expect, it } from "vitest";
import { forwardsIn, Harness, isType, prompt } from "./node-harness.js";

/**
 * B out of A's membership and back, heard from (a message of its own) before any snapshot of it:
 * A, routing round-robin, forwards r1 to B, which acks it.
 */
function forwardedBeforeSnapshot(): Harness {
  const h = new Harness(["A", "B"], { forwardTimeoutMs: 30_000, policy: "round-robin" });
  h.gossip(3);
  h.apply("A", h.node("A").removePeer("B"));
  h.gossip(2);
  expect(h.node("A").addPeer("B")).toBe(true);
  h.input("A", { type: "peer-message", from: "B", msg: { type: "cancel", reqId: "x", attempt: 1 } });
  h.client("A", "r0", prompt(1, 1));
  expect(forwardsIn(h.client("A", "r1", prompt(1, 2)))).toEqual(["B"]);
  h.deliver(isType("forward"));
  h.deliver(isType("forward-ack"));
  return h;
}

describe("a peer back from gone in a newer epoch", () => {
  it("the forwards its old process acked fall back at its first snapshot", () => {
    const h = forwardedBeforeSnapshot();
    h.crash("B");
    h.restart("B");
    h.gossip(3);
    expect(h.node("A").stats().fallbacks).toBe(1);
    h.finishRuns("A");
    h.finishRuns("A");
    expect(h.repliesFor("r1")[0]?.record).toMatchObject({ servedBy: "A", fallbacks: 1 });
  });

  it("control: back in the same epoch, the forward is its own and is answered", () => {
    const h = forwardedBeforeSnapshot();
    h.gossip(3);
    expect(h.node("A").stats().fallbacks).toBe(0);
    h.finishRuns("B");
    h.deliver(isType("result"));
    expect(h.repliesFor("r1")[0]?.record).toMatchObject({ servedBy: "B", fallbacks: 0 });
  });
});
