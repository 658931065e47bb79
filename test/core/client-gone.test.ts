/**
 * A client hanging up before its reply (`client-gone`, client-gone.ts), hand-driven in the daemon's
 * forward settings: the request settles unreplied wherever it is — taken out of the origin's queue,
 * cancelled at the peer it was forwarded to, or left to finish on the origin's engine — and nothing
 * replies to it afterwards.
 */
import { describe, expect, it } from "vitest";
import { GoneClients } from "../../src/core/node/client-gone.js";
import { FORWARD_CANCELLED } from "../../src/core/node/node.js";
import type { Effect } from "../../src/core/node/types.js";
import {
  answerLost,
  DAEMON_RECOVERY,
  type Harness,
  isType,
  type Mail,
  prompt,
  warmPair,
} from "./node-harness.js";

const FORWARD_MS = 5_000;

/** A, B as the daemon runs them (trust, answer recovery); B holds topic 1, so A forwards it there. */
function setup(): Harness {
  return warmPair({ ...DAEMON_RECOVERY, forwardAckTimeoutMs: 250, forwardTimeoutMs: FORWARD_MS });
}

const gone = (h: Harness, id: string, reqId: string) => h.input(id, { type: "client-gone", reqId });
const replies = (effects: Effect[]) => effects.filter((e) => e.type === "reply");
const toB = (type: string) => (m: Mail) => m.to === "B" && m.msg.type === type;
const trustOfB = (h: Harness) => h.node("A").peers()[0]?.trust;

describe("client-gone: a client hangs up before its reply", () => {
  it("queued at the origin: the job leaves the queue, never runs, and nothing replies", () => {
    const h = setup();
    h.client("A", "busy", prompt(9, 1)); // A's one slot is taken
    h.client("A", "r1", prompt(8, 1)); // no peer holds topic 8: it queues here
    expect(h.node("A").queueDepth()).toBe(2);
    const eff = gone(h, "A", "r1");
    expect(replies(eff)).toHaveLength(0);
    expect(h.node("A").queueDepth()).toBe(1);
    expect(h.node("A").stats()).toMatchObject({ clientGoneQueued: 1, clientGoneForwarded: 0 });
    h.finishRuns("A"); // "busy" ends: nothing else starts
    expect(h.members.get("A")?.runs.size).toBe(0);
    expect(h.node("A").queueDepth()).toBe(0);
    h.advanceLive(2 * FORWARD_MS);
    expect(h.repliesFor("busy")).toHaveLength(1);
    expect(h.repliesFor("r1")).toHaveLength(0);
    expect(h.node("A").stats().servedLocal).toBe(1);
  });

  it("forwarded and queued at the peer: the peer gets the cancel and drops it; no fallback, no reply", () => {
    const h = setup();
    h.client("B", "busy", prompt(9, 1)); // B's one slot is taken
    h.client("A", "r1", prompt(1, 1));
    h.deliver(isType("forward"));
    h.deliver(isType("forward-ack"));
    expect(h.node("B").queueDepth()).toBe(2);
    const eff = gone(h, "A", "r1");
    expect(replies(eff)).toHaveLength(0);
    expect(h.mailbox.filter(toB("cancel"))).toMatchObject([{ from: "A", msg: { reqId: "r1", attempt: 1 } }]);
    // Its attempt's timers are cancelled: no fallback, no local run, ever.
    const timers = [...(h.members.get("A")?.timers.keys() ?? [])];
    expect(timers.filter((k) => k.endsWith(":r1"))).toEqual([]);
    h.deliver(toB("cancel"));
    expect(h.node("B").stats().cancelledForwards).toBe(1);
    expect(h.node("B").queueDepth()).toBe(1);
    // B's word that it dropped the job comes back to A: dropped quietly.
    expect(h.mailbox.filter((m) => m.msg.type === "error" && m.msg.error === FORWARD_CANCELLED)).toHaveLength(
      1,
    );
    h.deliver();
    h.finishRuns();
    h.advanceLive(2 * FORWARD_MS);
    expect(h.repliesFor("r1")).toHaveLength(0);
    expect(h.node("A").stats()).toMatchObject({ clientGoneForwarded: 1, fallbacks: 0, servedLocal: 0 });
    expect(h.node("B").stats().servedForPeers).toBe(0);
    // Not the peer's fault: trust is not charged.
    expect(trustOfB(h)).toMatchObject({ failures: 0, state: "closed" });
  });

  it("forwarded and running at the peer: its late result is dropped, nothing runs at the origin", () => {
    const h = setup();
    h.client("A", "r1", prompt(1, 1));
    h.deliver(isType("forward"));
    h.deliver(isType("forward-ack"));
    expect(h.members.get("B")?.runs.size).toBe(1); // running at B
    gone(h, "A", "r1");
    h.deliver(toB("cancel"));
    expect(h.node("B").stats().cancelledForwards).toBe(0); // started: it finishes
    h.finishRuns("B");
    expect(h.mailbox.filter(isType("result"))).toHaveLength(1);
    h.deliver();
    h.advanceLive(2 * FORWARD_MS);
    expect(h.repliesFor("r1")).toHaveLength(0);
    expect(h.members.get("A")?.runs.size).toBe(0);
    expect(h.node("A").stats()).toMatchObject({ lateReplies: 1, fallbacks: 0, clientGoneForwarded: 1 });
    expect(trustOfB(h)).toMatchObject({ failures: 0, state: "closed" });
  });

  it("running at the origin: the run completes, its cache insert stands, and nothing replies", () => {
    const h = setup();
    h.client("A", "r1", prompt(8, 1));
    expect(h.members.get("A")?.runs.size).toBe(1);
    const tree = h.node("A").treeSize();
    expect(replies(gone(h, "A", "r1"))).toHaveLength(0);
    expect(h.node("A").stats().clientGoneRunning).toBe(1);
    h.finishRuns("A"); // checkInvariants: the tree still mirrors the engine's cache
    expect(h.node("A").treeSize()).toBeGreaterThan(tree);
    expect(h.node("A").queueDepth()).toBe(0);
    h.advanceLive(2 * FORWARD_MS);
    expect(h.repliesFor("r1")).toHaveLength(0);
    // The next request of that prompt finds it cached.
    h.client("A", "r2", prompt(8, 1));
    h.finishRuns("A");
    expect(h.repliesFor("r2")[0]?.record.actualHitTokens).toBeGreaterThan(0);
  });

  it("running at the origin while its silent peer is asked again: no more asking, no reply from either", () => {
    const h = setup();
    answerLost(h, "r1", prompt(1, 1)); // B's answer is lost: A gives B up, runs r1 itself
    for (let t = 0; h.members.get("A")?.runs.size === 0; t += 10) {
      if (t > 10_000) throw new Error("no local run within 10 s");
      h.advanceLive(10);
      h.drop(toB("forward"));
    }
    expect(h.members.get("A")?.timers.has("hedge:r1")).toBe(true);
    gone(h, "A", "r1");
    expect(h.members.get("A")?.timers.has("hedge:r1")).toBe(false);
    expect(h.node("A").stats().clientGoneRunning).toBe(1);
    h.deliver(); // whatever B still says of r1
    h.finishRuns("A");
    h.advanceLive(2 * FORWARD_MS);
    expect(h.mailbox.filter(toB("forward"))).toHaveLength(0);
    expect(h.repliesFor("r1")).toHaveLength(0);
  });

  it("an unknown or answered request: nothing happens", () => {
    const h = setup();
    h.client("A", "r1", prompt(8, 1));
    h.finishRuns("A");
    expect(h.repliesFor("r1")).toHaveLength(1);
    const before = h.node("A").stats();
    for (const id of ["r1", "never"]) {
      const eff = gone(h, "A", id);
      expect(eff.filter((e) => e.type !== "set-timer")).toEqual([]);
    }
    expect(h.node("A").stats()).toEqual(before);
    // A request id reused after its client left is a new request: answered.
    h.client("A", "r3", prompt(7, 1));
    gone(h, "A", "r3");
    h.finishRuns("A");
    h.client("A", "r3", prompt(7, 2));
    h.finishRuns("A");
    expect(h.repliesFor("r3")).toHaveLength(1);
  });

  it("the invariant: a reply to a request whose client is gone throws", () => {
    const g = new GoneClients();
    const reply = { type: "reply", reqId: "r1" } as Effect;
    g.check([reply]);
    g.add("r1");
    expect(() => g.check([reply])).toThrow(/client hung up/);
    g.reopened("r1");
    g.check([reply]);
  });
});
