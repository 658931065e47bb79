/**
 * A peer removed and added back (DNS) whose first snapshot back shows a newer epoch than it left in
 * (anti-entropy `renewed`) restarted while out — or after we forwarded to it again, before its first
 * snapshot came. The full mesh's acks name no epoch, so which process took those forwards is unknown:
 * each goes to it again at once (a probe), not after the whole forward timeout. Its new process runs
 * what its old one lost, and only acks again what it took itself: nothing runs twice.
 */
import { describe, expect, it } from "vitest";
import { forwardsIn, Harness, isType, prompt } from "./node-harness.js";

/** A, routing round-robin, keeps r0 and forwards r1 to B, which acks it. */
function forwardR1ToB(h: Harness): void {
  h.client("A", "r0", prompt(1, 1));
  expect(forwardsIn(h.client("A", "r1", prompt(1, 2)))).toEqual(["B"]);
  h.deliver(isType("forward"));
  h.deliver(isType("forward-ack"));
}

/**
 * B out of A's membership and back, heard from (a message of its own) before any snapshot of it:
 * A, routing round-robin, forwards r1 to B, which acks it. With `restartWhileOut`, B restarts while out.
 */
function forwardedBeforeSnapshot(restartWhileOut = false): Harness {
  const h = new Harness(["A", "B"], { forwardTimeoutMs: 30_000, policy: "round-robin" });
  h.gossip(3);
  h.apply("A", h.node("A").removePeer("B"));
  if (restartWhileOut) {
    h.crash("B");
    h.restart("B");
  }
  h.gossip(2); // B's snapshots reach A while it is no member: dropped unread
  expect(h.node("A").addPeer("B")).toBe(true);
  h.input("A", { type: "peer-message", from: "B", msg: { type: "cancel", reqId: "x", attempt: 1 } });
  forwardR1ToB(h);
  return h;
}

describe("a peer back from gone in a newer epoch", () => {
  it("the forwards its old process acked go to its new one at its first snapshot", () => {
    const h = forwardedBeforeSnapshot();
    h.crash("B");
    h.restart("B");
    h.gossip(3);
    expect(h.mailbox.filter((m) => m.to === "B" && m.msg.type === "forward")).toHaveLength(1);
    h.deliver(isType("forward"));
    h.deliver(isType("forward-ack"));
    h.finishRuns("B");
    h.deliver(isType("result"));
    expect(h.repliesFor("r1")[0]?.record).toMatchObject({ servedBy: "B", fallbacks: 0 });
    expect(h.now).toBeLessThan(30_000); // not after the forward timeout
  });

  it("control: back in the same epoch, the forward is its own and is answered", () => {
    const h = forwardedBeforeSnapshot();
    h.gossip(3);
    expect(h.node("A").stats().fallbacks).toBe(0);
    h.deliver(isType("forward")); // sent again: B's duplicate window holds it
    expect(h.members.get("B")?.runs.size).toBe(1);
    expect(h.members.get("A")?.runs.size).toBe(1); // r0 only
    h.finishRuns("B");
    h.deliver(isType("result"));
    expect(h.repliesFor("r1")[0]?.record).toMatchObject({ servedBy: "B", fallbacks: 0 });
  });
});

describe("a peer that restarted while out, forwarded to before its first snapshot back", () => {
  it("the forward its new process acked is not run again here", () => {
    const h = forwardedBeforeSnapshot(true);
    h.gossip(3);
    expect(h.node("A").stats().fallbacks).toBe(0);
    h.finishRuns("B");
    h.deliver(isType("result"));
    expect(h.repliesFor("r1")[0]?.record).toMatchObject({ servedBy: "B", fallbacks: 0 });
  });
});

describe("a member that restarted, forwarded to before its first snapshot of the new epoch", () => {
  it("the forward its new process acked is not run again here", () => {
    const h = new Harness(["A", "B"], { forwardTimeoutMs: 30_000, policy: "round-robin" });
    h.gossip(3);
    h.crash("B");
    h.restart("B");
    forwardR1ToB(h);
    h.gossip(3); // B's new epoch: a restart, but its new process holds r1
    expect(h.node("A").stats().fallbacks).toBe(0);
    expect(h.members.get("A")?.runs.size).toBe(1); // r0 only
    h.deliver(isType("forward")); // sent again: B's duplicate window holds it
    expect(h.members.get("B")?.runs.size).toBe(1);
    h.finishRuns("B");
    h.deliver(isType("result"));
    expect(h.repliesFor("r1")[0]?.record).toMatchObject({ servedBy: "B", fallbacks: 0 });
    expect(h.now).toBeLessThan(30_000);
  });
});
