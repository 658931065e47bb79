/**
 * Under gossip "scuttlebutt" a member's epoch reaches us relayed too, and the first one we hear of a
 * member may be a stale one a relay still carries (it restarted since). Its current epoch then reads
 * as a restart: only the forwards an older incarnation acked may fail over (their acks say its
 * epoch), not one it acked in the epoch it still runs — failing that over runs the request twice.
 */
import { describe, expect, it } from "vitest";
import type { MeshMessage } from "../../src/core/node/types.js";
import { answerLost, daemonGossip, type Harness, isType, type Mail, prompt } from "./node-harness.js";

const ACK_MS = 250;
type MeshMail = { from: string; to: string; msg: MeshMessage };
const gossipFrom =
  (id: string) =>
  (m: MeshMail): boolean =>
    m.from === id && m.msg.channel === "gossip";
const toB = (m: Mail) => m.to === "B";

/**
 * A, B and C as the daemon runs them; B served topic 1 in epoch 0 and C holds that state. A then
 * restarts (it knows no epochs) and B restarts too, its gossip held: A's first word of B is C's relay
 * of B's epoch-0 state. Returns B's current epoch.
 */
function staleRelay(): { h: Harness; epochB: number } {
  const h = daemonGossip(["A", "B", "C"], ACK_MS);
  expect(h.node("C").heldOf("B")?.epoch).toBe(0);
  h.crash("A");
  h.crash("B");
  h.advance(10);
  h.restart("A");
  h.restart("B");
  const epochB = h.node("B").currentEpoch;
  expect(epochB).toBeGreaterThan(0);
  h.advanceLive(3_000, 10, gossipFrom("B"));
  // A knows B only from C's relay: its epoch-0 state, the prefix B served then.
  expect(h.node("A").heldOf("B")?.epoch).toBe(0);
  expect(h.node("A").livenessOf("B")).toBe("live");
  return { h, epochB };
}

/** A client request at A that A forwards to B. */
function forwardToB(h: Harness, reqId: string): void {
  h.client("A", reqId, prompt(1, 1));
  expect(h.mailbox.filter((m) => m.msg.type === "forward" && toB(m))).toHaveLength(1);
}

describe("gossip mode: a stale relayed epoch is not a restart of the jobs a member acked", () => {
  it("a forward B acked in its current epoch is not failed over when that epoch arrives", () => {
    const { h, epochB } = staleRelay();
    forwardToB(h, "r1");
    h.deliver(isType("forward"));
    const acks = h.mailbox.filter(isType("forward-ack"));
    expect(acks.map((m) => m.msg.type === "forward-ack" && m.msg.epoch)).toEqual([epochB]);
    h.deliver(isType("forward-ack"));
    // B's own gossip at last: its current epoch, newer than C's relay.
    h.deliverMesh();
    expect(h.node("A").heldOf("B")?.epoch).toBe(epochB);
    expect(h.node("A").stats().fallbacks).toBe(0);
    expect(h.members.get("A")?.runs.size).toBe(0); // not run a second time here
    h.finishRuns("B");
    h.deliver();
    const replies = h.repliesFor("r1");
    expect(replies).toHaveLength(1);
    expect(replies[0]?.record).toMatchObject({ servedBy: "B", fallbacks: 0 });
    expect(h.node("B").stats().duplicateForwards).toBe(0);
  });

  it("a forward acked without an epoch (implied by a first chunk) is not failed over when B's epoch arrives", () => {
    const { h } = staleRelay();
    forwardToB(h, "r1");
    h.deliver(isType("forward"));
    h.deliver((m) => {
      if (m.msg.type !== "forward-ack") return false;
      delete (m.msg as { epoch?: number }).epoch;
      return true;
    });
    h.deliverMesh(); // B's own gossip: its current epoch, newer than C's relay
    expect(h.node("A").stats().fallbacks).toBe(0);
    expect(h.members.get("A")?.runs.size ?? 0).toBe(0);
    h.finishRuns("B");
    h.deliver();
    expect(h.repliesFor("r1")[0]?.record).toMatchObject({ servedBy: "B", fallbacks: 0 });
  });

  it("a forward not acked yet waits for its ack, not for the epoch", () => {
    const { h } = staleRelay();
    forwardToB(h, "r1");
    h.deliverMesh(); // B's current epoch arrives before the forward does
    expect(h.node("A").stats().fallbacks).toBe(0);
    h.deliver();
    h.finishRuns("B");
    h.deliver();
    expect(h.repliesFor("r1")[0]?.record).toMatchObject({ servedBy: "B", fallbacks: 0 });
    expect(h.members.get("A")?.runs.size).toBe(0);
  });

  it("a real restart still fails over what B acked before it", () => {
    const { h, epochB } = staleRelay();
    forwardToB(h, "r1");
    h.deliver(isType("forward"));
    h.deliver(isType("forward-ack"));
    h.deliverMesh(); // B's current epoch: no restart of what it acked in it
    expect(h.node("A").stats().fallbacks).toBe(0);
    h.crash("B");
    h.advance(10);
    h.restart("B");
    expect(h.node("B").currentEpoch).toBeGreaterThan(epochB);
    h.deliverMesh(); // a real one: B's next epoch
    expect(h.node("A").stats().fallbacks).toBe(1);
    expect(h.members.get("A")?.runs.size).toBe(1); // r1 runs at A now
    h.finishRuns("A");
    expect(h.repliesFor("r1")).toHaveLength(1);
    expect(h.repliesFor("r1")[0]?.record).toMatchObject({ servedBy: "A", fallbacks: 1 });
  });

  it("an older incarnation's ack arriving after the restart fails the forward over then", () => {
    const { h } = staleRelay();
    forwardToB(h, "r1");
    h.deliver(isType("forward")); // B acks, then crashes: the ack is still on its way
    h.deliverMesh();
    h.crash("B");
    h.advance(10);
    h.restart("B");
    h.deliverMesh(); // the restart first: r1 is not acked yet, so it waits
    expect(h.node("A").stats().fallbacks).toBe(0);
    h.deliver(isType("forward-ack")); // the ack of an incarnation A knows is gone
    expect(h.node("A").stats().fallbacks).toBe(1);
    expect(h.members.get("A")?.runs.size).toBe(1);
    h.finishRuns("A");
    expect(h.repliesFor("r1")[0]?.record).toMatchObject({ servedBy: "A", fallbacks: 1 });
  });

  it("an ack without an epoch (implied by an answer's first chunk) after the restart is taken as acked", () => {
    const { h } = staleRelay();
    forwardToB(h, "r1");
    h.deliverMesh(); // the stale relay's successor, B's current epoch: r1 is not acked yet, so it waits
    expect(h.node("A").stats().fallbacks).toBe(0);
    // The ack a streaming run's first chunk implies carries no epoch: B's current incarnation (which
    // holds the job) cannot be told from an older one by it, and failing over would run it twice.
    h.deliver(isType("forward"));
    h.deliver((m) => {
      if (m.msg.type !== "forward-ack") return false;
      delete (m.msg as { epoch?: number }).epoch;
      return true;
    });
    expect(h.node("A").stats().fallbacks).toBe(0);
    h.finishRuns("B");
    h.deliver();
    expect(h.repliesFor("r1")[0]?.record).toMatchObject({ servedBy: "B", fallbacks: 0 });
    expect(h.members.get("A")?.runs.size ?? 0).toBe(0);
  });

  it("a hedge on B's current incarnation goes on asking it when that epoch arrives", () => {
    const { h } = staleRelay();
    answerLost(h, "r1", prompt(1, 1));
    expect(h.repliesFor("r1")).toHaveLength(0);
    // Its answer's probes lost too: A gives B up and runs r1 itself, asking B again meanwhile.
    for (let t = 0; h.node("A").stats().fallbacks === 0; t += 10) {
      if (t > 10_000) throw new Error("no fallback");
      h.drop(toB);
      h.advanceLive(10, 10, gossipFrom("B"));
    }
    expect(h.members.get("A")?.runs.size).toBe(1);
    h.drop(toB);
    h.deliverMesh(); // B's current epoch: its job and kept answer are still there
    h.advanceLive(4 * ACK_MS);
    expect(h.mailbox.filter((m) => m.msg.type === "forward" && toB(m)).length).toBeGreaterThan(0);
    h.deliver();
    expect(h.members.get("B")?.runs.size).toBe(0); // asked again, not run again
    const replies = h.repliesFor("r1");
    expect(replies).toHaveLength(1);
    expect(replies[0]?.record).toMatchObject({ servedBy: "B" });
  });
});
