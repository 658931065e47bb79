/** Dynamic membership (peers found or lost at run time, e.g. by DNS): addPeer / removePeer by hand. */
import { describe, expect, it } from "vitest";
import { resolveNodeConfig } from "../../src/core/node/config.js";
import type { Effect } from "../../src/core/node/types.js";
import { simOutput } from "../../src/engines/sim/cost.js";
import { forwardsIn, Harness, prompt } from "./node-harness.js";

function sendsTo(effects: Effect[], to: string): Effect[] {
  return effects.filter((e) => e.type === "send" && e.to === to);
}

/** Runs A's next anti-entropy tick and returns what A sent (delivering nothing). */
function tickOf(h: Harness, id: string): Effect[] {
  h.advance(1);
  return h.input(id, { type: "timer", timer: { kind: "poll" } });
}

describe("PrefixNode — dynamic membership", () => {
  it("removing the target of a pending forward fails over to the next candidate at once, answered once", () => {
    const h = new Harness(["A", "B", "C"]);
    h.warm("B", "wb", prompt(1, 1)); // B holds the whole topic prefix
    h.warm("C", "wc", prompt(1, 2, 32, 48)); // C holds half of it
    h.gossip(3);
    const tokens = prompt(1, 3);
    expect(forwardsIn(h.client("A", "r1", tokens))).toEqual(["B"]);

    const eff = h.node("A").removePeer("B");
    h.apply("A", eff);
    // The forward's timer is cancelled and the next candidate gets the request, with a new attempt.
    expect(eff).toContainEqual({ type: "cancel-timer", timer: { kind: "forward", reqId: "r1", attempt: 1 } });
    expect(forwardsIn(eff)).toEqual(["C"]);
    const toC = eff.find((e) => e.type === "send" && e.msg.type === "forward");
    expect(toC?.type === "send" && toC.msg.type === "forward" && toC.msg.attempt).toBe(2);
    // Timers of the abandoned attempt 1 (a runtime that failed to drop them) never act on attempt 2.
    for (const kind of ["forward", "ack"] as const)
      expect(h.input("A", { type: "timer", timer: { kind, reqId: "r1", attempt: 1 } })).toEqual([]);
    expect(h.node("A").stats().fallbacks).toBe(1);

    // B answers its (now stale) attempt anyway: A ignores and counts it — B is no longer a member.
    h.deliver((m) => m.to === "B");
    h.finishRuns("B");
    const before = h.node("A").stats().unknownSender;
    h.deliver((m) => m.from === "B");
    expect(h.node("A").stats().unknownSender).toBeGreaterThan(before);
    expect(h.repliesFor("r1")).toHaveLength(0);

    h.deliver((m) => m.to === "C");
    h.finishRuns("C");
    h.deliver((m) => m.from === "C");
    const replies = h.repliesFor("r1");
    expect(replies).toHaveLength(1);
    expect(replies[0]?.record.servedBy).toBe("C");
    expect(replies[0]?.record.fallbacks).toBe(1);
    expect(replies[0]?.outcome.ok && replies[0].outcome.result.text).toBe(simOutput(tokens, 1));
  });

  it("removing the only candidate falls back to local execution at once", () => {
    const h = new Harness(["A", "B"]);
    h.warm("B", "wb", prompt(2, 1));
    h.gossip(3);
    expect(forwardsIn(h.client("A", "r", prompt(2, 2)))).toEqual(["B"]);
    const eff = h.node("A").removePeer("B");
    h.apply("A", eff);
    expect(eff.some((e) => e.type === "engine-run")).toBe(true);
    h.finishRuns("A");
    expect(h.repliesFor("r")).toHaveLength(1);
    expect(h.repliesFor("r")[0]?.record.servedBy).toBe("A");
  });

  it("a removed peer's estimate is dropped; it is no longer routed or gossiped to", () => {
    const h = new Harness(["A", "B", "C"]);
    h.warm("B", "wb", prompt(3, 1));
    h.gossip(3);
    const a = h.node("A");
    expect(a.peerIndex().estimateSize("B")).toBeGreaterThan(0);
    expect(a.removePeer("B")).toEqual([]);
    expect(a.peerIndex().estimateSize("B")).toBe(0);
    expect(a.peerIndex().match("B", prompt(3, 2))).toBe(0);
    expect(a.heldOf("B")).toBeUndefined();
    expect(a.peers().map((p) => p.id)).toEqual(["C"]);
    expect(sendsTo(tickOf(h, "A"), "B")).toEqual([]);
    expect(sendsTo(a.goodbye(), "B")).toEqual([]);
    // B still holds the prefix, but A routes only among members.
    expect(forwardsIn(h.client("A", "r", prompt(3, 2)))).toEqual([]);
    // Removing twice, or a stranger, changes nothing.
    expect(a.removePeer("B")).toEqual([]);
    expect(a.removePeer("Z")).toEqual([]);
  });

  it("an added peer starts unknown, gets a full snapshot at the next tick and is routed to once live", () => {
    const h = new Harness(["A", "B", "C"], { maxPeers: 2 });
    // A and C do not know each other yet (e.g. C's address is not in A's DNS answer).
    h.node("A").removePeer("C");
    h.node("C").removePeer("A");
    h.warm("C", "wc", prompt(4, 1));
    h.gossip(3);
    h.advance(5_000); // long after A's start: silence must count from the join, not from the start
    h.deliver();
    // (A's local runs are left unfinished so A does not cache the topic itself.)
    expect(forwardsIn(h.client("A", "r0", prompt(4, 2)))).toEqual([]);

    expect(h.node("A").addPeer("C")).toBe(true);
    const view = h
      .node("A")
      .peers()
      .find((p) => p.id === "C");
    expect(view?.liveness).toBe("unknown");
    expect(view?.estimateTokens).toBe(0);
    // First tick after the join: C gets A's full state although C has not said a word yet.
    const first = sendsTo(tickOf(h, "A"), "C");
    expect(first).toHaveLength(1);
    const snap =
      first[0]?.type === "send" && first[0].msg.type === "snapshot" ? first[0].msg.snapshot : undefined;
    expect(snap?.kind).toBe("full");
    // Not live yet: still no forwards to it.
    expect(forwardsIn(h.client("A", "r1", prompt(4, 3)))).toEqual([]);

    // C admits A as well; after a few rounds A holds C's estimate and routes C's topic there.
    expect(h.node("C").addPeer("A")).toBe(true);
    h.drop(() => true);
    h.gossip(3);
    expect(
      h
        .node("A")
        .peers()
        .find((p) => p.id === "C")?.liveness,
    ).toBe("live");
    expect(h.node("A").peerIndex().estimateSize("C")).toBeGreaterThan(0);
    expect(h.node("C").heldOf("A")?.version).toBe(h.node("A").treeVersion());
    expect(forwardsIn(h.client("A", "r2", prompt(4, 4)))).toEqual(["C"]);
  });

  it("refuses itself, invalid ids, current members and a full membership", () => {
    const h = new Harness(["A", "B"], { maxPeers: 2 });
    const a = h.node("A");
    expect(a.maxPeers()).toBe(2);
    expect(a.addPeer("A")).toBe(false);
    expect(a.addPeer("B")).toBe(false);
    expect(a.addPeer("bad id")).toBe(false);
    expect(a.addPeer("x".repeat(65))).toBe(false);
    expect(a.addPeer("C")).toBe(true);
    expect(a.addPeer("D")).toBe(false); // 2 peers: full
    expect(a.peers().map((p) => p.id)).toEqual(["B", "C"]);
    a.removePeer("B");
    expect(a.addPeer("D")).toBe(true);
    // Without maxPeers the membership is the static list: nothing can be added.
    expect(new Harness(["A", "B"]).node("A").addPeer("C")).toBe(false);
  });

  it("a removed peer's messages are ignored and counted; re-adding starts from scratch", () => {
    const h = new Harness(["A", "B"], { maxPeers: 1 });
    h.warm("B", "wb", prompt(5, 1));
    h.gossip(3);
    const a = h.node("A");
    a.removePeer("B");
    h.gossip(1);
    expect(a.stats().unknownSender).toBeGreaterThan(0);
    expect(a.peerIndex().estimateSize("B")).toBe(0);
    expect(a.addPeer("B")).toBe(true);
    expect(a.peers()[0]?.liveness).toBe("unknown");
    h.gossip(3);
    expect(a.peers()[0]?.liveness).toBe("live");
    expect(a.peerIndex().estimateSize("B")).toBeGreaterThan(0);
  });

  it("a restart keeps the membership as changed at run time", () => {
    const h = new Harness(["A", "B", "C"], { maxPeers: 3 });
    const a = h.node("A");
    a.removePeer("B");
    a.addPeer("D");
    h.restart("A");
    expect(a.peers().map((p) => p.id)).toEqual(["C", "D"]);
    expect(a.addPeer("E")).toBe(true);
    expect(a.addPeer("F")).toBe(false);
  });

  it("validates maxPeers against the static list", () => {
    expect(() => resolveNodeConfig({ id: "A", peers: ["B", "C"], maxPeers: 1, capacityTokens: 10 })).toThrow(
      /maxPeers/,
    );
    expect(resolveNodeConfig({ id: "A", peers: ["B"], maxPeers: 256, capacityTokens: 10 }).maxPeers).toBe(
      256,
    );
  });
});
