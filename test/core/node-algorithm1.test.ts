/**
 * Algorithm 1 by hand: which node serves a request (longest estimated match, ties to self, push-back),
 * how a forwarded request is served, eviction, admission and config checks; each scenario drives
 * PrefixNodes step by step through the harness.
 */
import { describe, expect, it } from "vitest";
import { resolveNodeConfig } from "../../src/core/node/config.js";
import { simOutput } from "../../src/engines/sim/cost.js";
import { forwardsIn, Harness, prompt } from "./node-harness.js";

describe("PrefixNode — Algorithm 1", () => {
  it("forwards to the peer with the longest estimated match and answers once with its result", () => {
    const h = new Harness(["A", "B", "C"]);
    h.warm("B", "warm-b", prompt(1, 1));
    h.warm("C", "warm-c", prompt(1, 2, 32, 48)); // C holds only half the topic prefix
    h.gossip(3);
    const tokens = prompt(1, 3);
    const eff = h.client("A", "r1", tokens);
    expect(forwardsIn(eff)).toEqual(["B"]);
    h.deliver();
    h.finishRuns("B");
    h.deliver();
    const replies = h.repliesFor("r1");
    expect(replies).toHaveLength(1);
    const r = replies[0]!;
    expect(r.outcome.ok && r.outcome.result.text).toBe(simOutput(tokens, 1));
    expect(r.record.servedBy).toBe("B");
    expect(r.record.hops).toBe(1);
    expect(r.record.predictedHitTokens).toBe(64);
    expect(r.record.actualHitTokens).toBe(64);
    // Line 17: A now believes B holds the whole prompt (block-granular).
    expect(h.node("A").peerIndex().match("B", tokens)).toBe(80);
  });

  it("ties go to self: no forward when the local match is as long", () => {
    const h = new Harness(["A", "B"]);
    h.warm("B", "wb", prompt(2, 1));
    h.warm("A", "wa", prompt(2, 2));
    h.gossip(3);
    const eff = h.client("A", "r", prompt(2, 3));
    expect(forwardsIn(eff)).toEqual([]);
    expect(eff.some((e) => e.type === "engine-run")).toBe(true);
  });

  it("serves locally when nobody holds anything", () => {
    const h = new Harness(["A", "B"]);
    h.gossip(2);
    const eff = h.client("A", "r", prompt(3, 1));
    expect(forwardsIn(eff)).toEqual([]);
    h.finishRuns();
    expect(h.repliesFor("r")[0]?.record.servedBy).toBe("A");
  });

  it("respects push-back until it expires", () => {
    const h = new Harness(["A", "B"], { pushBackQueueThreshold: 1, pushBackMs: 250 });
    h.warm("B", "wb", prompt(4, 1));
    h.gossip(3);
    // Load B: three client requests queue there (one running, two waiting).
    for (let i = 0; i < 3; i++) h.client("B", `load${i}`, prompt(9, i));
    h.advance(100); // B's tick advertises push-back
    h.deliver((m) => m.msg.type === "snapshot" && m.from === "B");
    expect(h.node("A").peers()[0]?.pushBackUntil).toBeGreaterThan(h.now);
    const during = h.client("A", "r1", prompt(4, 2));
    expect(forwardsIn(during)).toEqual([]);
    // (A's run is left unfinished so A does not cache the topic itself.)
    h.advance(260); // push-back over (B's newer ticks are not delivered)
    h.drop(() => true);
    const after = h.client("A", "r2", prompt(4, 3));
    expect(forwardsIn(after)).toEqual(["B"]);
  });

  it("a forwarded request is served by its receiver, never forwarded again; duplicates not rerun", () => {
    const h = new Harness(["A", "B", "C"]);
    h.warm("C", "wc", prompt(10, 1));
    h.gossip(3);
    const tokens = prompt(10, 2);
    const msg = {
      type: "forward" as const,
      reqId: "x",
      attempt: 1,
      hops: 1,
      request: { id: "x", tokens, maxTokens: 1 },
    };
    const eff = h.input("B", { type: "peer-message", from: "A", msg });
    expect(eff.filter((e) => e.type === "send" && e.msg.type === "forward")).toHaveLength(0);
    expect(eff.some((e) => e.type === "engine-run")).toBe(true);
    expect(eff.filter((e) => e.type === "send").map((e) => e.type === "send" && e.msg.type)).toEqual([
      "forward-ack",
    ]);
    // A duplicate (or the origin's probe) of a running forward is acked again, never run twice.
    const dup = h.input("B", { type: "peer-message", from: "A", msg });
    expect(dup.map((e) => e.type === "send" && e.msg.type)).toEqual(["forward-ack"]);
    expect(h.node("B").stats().duplicateForwards).toBe(1);
    const tooFar = h.input("B", { type: "peer-message", from: "A", msg: { ...msg, reqId: "y", hops: 2 } });
    expect(tooFar.some((e) => e.type === "send" && e.msg.type === "error")).toBe(true);
  });

  it("ignores and counts messages from unknown senders", () => {
    const h = new Harness(["A", "B"]);
    const eff = h.input("A", { type: "peer-message", from: "mallory", msg: { type: "goodbye" } });
    expect(eff).toEqual([]);
    expect(h.node("A").stats().unknownSender).toBe(1);
  });

  it("evicts LRU until the request fits and keeps the tree equal to the engine cache", () => {
    const h = new Harness(["A"], {}, 200);
    for (let q = 0; q < 6; q++) {
      h.client("A", `r${q}`, prompt(q, q, 60, 20));
      h.finishRuns("A");
      const tree = h.node("A").localTree();
      const cache = h.members.get("A")!.engine.cache;
      expect(tree.size).toBeLessThanOrEqual(200);
      expect(tree.size).toBe(cache.size);
      for (const s of cache.sequences()) expect(tree.match(s)).toBe(s.length);
    }
    expect(h.node("A").stats().evictedTokens).toBeGreaterThan(0);
    expect(h.replies).toHaveLength(6);
  });

  it("rejects a full queue with 'overloaded' and bad input with 'invalid'", () => {
    const h = new Harness(["A"], { maxQueue: 2 });
    h.client("A", "a", prompt(1, 1));
    h.client("A", "b", prompt(1, 2));
    h.client("A", "c", prompt(1, 3));
    const c = h.repliesFor("c")[0];
    expect(c?.outcome).toMatchObject({ ok: false, code: "overloaded" });
    h.client("A", "e", new Uint32Array(0));
    const e = h.repliesFor("e")[0];
    expect(e?.outcome).toMatchObject({ ok: false, code: "invalid" });
  });

  it("validates its config with clear errors", () => {
    expect(() => resolveNodeConfig({ id: "A", peers: ["A"], capacityTokens: 10 })).toThrow(
      /must not include/,
    );
    expect(() => resolveNodeConfig({ id: "bad id!", capacityTokens: 10 })).toThrow(/id/);
    expect(() => resolveNodeConfig({ id: "A", capacityTokens: -1 })).toThrow(/capacityTokens/);
    expect(resolveNodeConfig({ id: "A", capacityTokens: 10 }).policy).toBe("affinity");
  });
});
