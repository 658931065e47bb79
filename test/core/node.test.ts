/** Algorithm 1 and §3 by hand: each scenario drives PrefixNodes step by step through the harness. */
import { describe, expect, it } from "vitest";
import { resolveNodeConfig } from "../../src/core/node/config.js";
import { PrefixNode } from "../../src/core/node/node.js";
import { simOutput } from "../../src/engines/sim/cost.js";
import { forwardsIn, Harness, isType, prompt } from "./node-harness.js";

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

  it("skips a suspected peer (silent for k × Δpoll) and clears suspicion on any message", () => {
    const h = new Harness(["A", "B"], { suspectAfterPolls: 3 });
    h.warm("B", "wb", prompt(5, 1));
    h.gossip(3);
    h.advance(350); // B's snapshots never arrive
    h.drop((m) => m.from === "B");
    expect(h.node("A").peers()[0]?.liveness).toBe("suspected");
    expect(forwardsIn(h.client("A", "r1", prompt(5, 2)))).toEqual([]);
    h.advance(100);
    h.deliver((m) => m.from === "B");
    expect(h.node("A").peers()[0]?.liveness).toBe("live");
    expect(forwardsIn(h.client("A", "r2", prompt(5, 3)))).toEqual(["B"]);
  });

  it("a silent peer is suspected, then down after downAfterPolls × Δpoll; any message revives it", () => {
    const h = new Harness(["A", "B"], { suspectAfterPolls: 3, downAfterPolls: 6 });
    h.gossip(3);
    expect(h.node("A").peers()[0]?.liveness).toBe("live");
    h.advance(350); // B's snapshots never arrive (a crash: no goodbye)
    h.drop((m) => m.from === "B");
    expect(h.node("A").peers()[0]?.liveness).toBe("suspected");
    h.advance(300);
    h.drop((m) => m.from === "B");
    expect(h.node("A").peers()[0]?.liveness).toBe("down");
    h.advance(100);
    h.deliver((m) => m.from === "B");
    expect(h.node("A").peers()[0]?.liveness).toBe("live");
  });

  it("a peer never heard from goes unknown → suspected → down, counted from our start", () => {
    const h = new Harness(["A", "B"], { suspectAfterPolls: 3, downAfterPolls: 6 });
    h.drop((m) => m.from === "B");
    expect(h.node("A").peers()[0]?.liveness).toBe("unknown");
    h.advance(350);
    h.drop((m) => m.from === "B");
    expect(h.node("A").peers()[0]?.liveness).toBe("suspected");
    h.advance(300);
    h.drop((m) => m.from === "B");
    expect(h.node("A").peers()[0]?.liveness).toBe("down");
  });

  it("without downAfterPolls a silent peer stays suspected (only a goodbye makes it down)", () => {
    const h = new Harness(["A", "B"], { suspectAfterPolls: 3 });
    h.gossip(3);
    h.advance(10_000);
    h.drop((m) => m.from === "B");
    expect(h.node("A").peers()[0]?.liveness).toBe("suspected");
  });

  it("refuses a down bound not above the suspect bound", () => {
    expect(() => new Harness(["A", "B"], { suspectAfterPolls: 3, downAfterPolls: 3 })).toThrow(
      /downAfterPolls must exceed suspectAfterPolls/,
    );
  });

  it("forward timeout → next best → local, answered exactly once; late replies dropped", () => {
    // No ack wait (ack timeout = forward timeout): this is about the forward timeout itself.
    const h = new Harness(["A", "B", "C"], {
      forwardTimeoutMs: 500,
      forwardAckTimeoutMs: 500,
      suspectAfterPolls: 100,
    });
    h.warm("B", "wb", prompt(6, 1));
    h.warm("C", "wc", prompt(6, 2, 32, 48));
    h.gossip(3);
    const tokens = prompt(6, 3);
    expect(forwardsIn(h.client("A", "r", tokens))).toEqual(["B"]);
    h.deliver((m) => m.to === "B" && m.msg.type === "forward"); // B runs it but is slow
    h.advance(500); // timeout → C
    const toC = h.mailbox.filter(isType("forward"));
    expect(toC.map((m) => m.to)).toEqual(["C"]);
    h.deliver(isType("forward"));
    // C fails the run: the error makes A try its next candidate, which is itself.
    const cRun = [...(h.members.get("C")?.runs.keys() ?? [])][0]!;
    h.input("C", { type: "engine-failed", jobId: cRun, error: "boom" });
    h.members.get("C")?.runs.clear();
    h.deliver(isType("error"));
    h.finishRuns("A");
    // B finally answers: too late.
    h.finishRuns("B");
    h.deliver(isType("result"));
    const replies = h.repliesFor("r");
    expect(replies).toHaveLength(1);
    expect(replies[0]?.record.servedBy).toBe("A");
    expect(replies[0]?.record.fallbacks).toBe(2);
    expect(replies[0]?.outcome.ok && replies[0].outcome.result.text).toBe(simOutput(tokens, 1));
    expect(h.node("A").stats().lateReplies).toBe(1);
  });

  it("target crashes mid-request: re-sent on its restart (new epoch), answered once", () => {
    const h = new Harness(["A", "B"], { forwardTimeoutMs: 60_000, suspectAfterPolls: 100 });
    h.warm("B", "wb", prompt(7, 1));
    h.gossip(3);
    const tokens = prompt(7, 2);
    expect(forwardsIn(h.client("A", "r", tokens))).toEqual(["B"]);
    h.deliver(isType("forward"));
    h.crash("B");
    h.restart("B");
    h.gossip(1); // B's first snapshot carries its new epoch: A learns B lost everything
    expect(h.node("A").peerIndex().estimateSize("B")).toBe(0);
    // Full-mesh acks name no epoch: which process took r is unknown, so it goes to B again.
    expect(h.members.get("A")?.runs.size).toBe(0);
    h.deliver(isType("forward"));
    h.finishRuns("B");
    h.gossip(2);
    h.deliver(isType("result"));
    const replies = h.repliesFor("r");
    expect(replies).toHaveLength(1);
    expect(replies[0]?.record).toMatchObject({ servedBy: "B", fallbacks: 0 });
    expect(replies[0]?.outcome.ok && replies[0].outcome.result.text).toBe(simOutput(tokens, 1));
  });

  it("connection refused suspects the peer at once and fails over", () => {
    const h = new Harness(["A", "B"]);
    h.warm("B", "wb", prompt(8, 1));
    h.gossip(3);
    h.client("A", "r", prompt(8, 2));
    const fwd = h.mailbox.find(isType("forward"))!;
    h.drop((m) => m === fwd);
    const eff = h.input("A", { type: "send-failed", to: "B", msg: fwd.msg, reason: "ECONNREFUSED" });
    expect(eff.some((e) => e.type === "engine-run")).toBe(true);
    expect(h.node("A").peers()[0]?.liveness).toBe("suspected");
    h.finishRuns("A");
    expect(h.repliesFor("r")).toHaveLength(1);
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

  it("goodbye stops routing to a peer at once", () => {
    const h = new Harness(["A", "B"]);
    h.warm("B", "wb", prompt(11, 1));
    h.gossip(3);
    h.input("A", { type: "peer-message", from: "B", msg: { type: "goodbye" } });
    expect(h.node("A").peers()[0]?.liveness).toBe("down");
    expect(forwardsIn(h.client("A", "r", prompt(11, 2)))).toEqual([]);
  });

  it("a peer that left stays down while it drains, and is back once it restarts", () => {
    const h = new Harness(["A", "B"]);
    h.warm("B", "wb", prompt(12, 1));
    h.gossip(3);
    h.client("A", "r", prompt(12, 2));
    h.deliver(isType("forward"));
    h.apply("B", h.node("B").goodbye());
    h.deliver(isType("goodbye"));
    expect(h.node("A").peers()[0]?.liveness).toBe("down");
    // Draining, B sends no more anti-entropy, and its answer to the forward does not revive it.
    h.advance(500);
    expect(h.mailbox.filter((m) => m.from === "B" && m.msg.type === "snapshot")).toEqual([]);
    h.finishRuns("B");
    h.deliver();
    expect(h.node("A").peers()[0]?.liveness).toBe("down");
    expect(forwardsIn(h.client("A", "r2", prompt(12, 3)))).toEqual([]);
    // Restarted, its first snapshot says it is back.
    h.restart("B");
    h.gossip(2);
    expect(h.node("A").peers()[0]?.liveness).toBe("live");
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

describe("PrefixNode — anti-entropy", () => {
  it("sends a full snapshot first, then deltas when the tree changed, heartbeats when not", () => {
    const h = new Harness(["A", "B"]);
    h.gossip(3);
    const sentBy = () => ({ ...h.node("A").stats().snapshotsSent });
    h.warm("A", "a1", prompt(1, 1));
    const before = sentBy();
    h.gossip(1);
    const afterChange = sentBy();
    expect(afterChange.delta + afterChange.full).toBeGreaterThan(before.delta + before.full);
    h.gossip(1);
    const idle = sentBy();
    expect(idle.heartbeat).toBeGreaterThan(afterChange.heartbeat);
    expect(idle.delta + idle.full).toBe(afterChange.delta + afterChange.full);
    expect(h.node("B").heldOf("A")).toEqual({ epoch: 0, version: h.node("A").treeVersion() });
    expect(h.node("B").peerIndex().match("A", prompt(1, 1))).toBe(80);
  });

  it("repairs an estimate polluted by a wrong optimistic insert with a full snapshot", () => {
    const h = new Harness(["A", "B"]);
    h.gossip(3);
    // A wrongly believes B caches this prompt (e.g. B could not keep it).
    h.node("A").peerIndex().updateTrieEstimate("B", prompt(3, 3));
    expect(h.node("A").peerIndex().estimateSize("B")).toBe(80);
    h.gossip(4);
    expect(h.node("A").peerIndex().estimateSize("B")).toBe(0);
    expect(h.node("B").stats().snapshotsSent.full).toBeGreaterThanOrEqual(2);
  });

  it("re-sends a lost delta as soon as the peer's ack shows a later snapshot arrived without it", () => {
    // B polls slowly, so its acks take long and A's optimism window (2 × ack delay + a poll) is long.
    const h = new Harness(["A", "B"], {}, 10_000, (id) => (id === "B" ? { pollMs: 300 } : {}));
    h.warm("A", "a0", prompt(2, 1));
    h.gossip(12);
    h.warm("A", "a1", prompt(1, 1));
    h.advance(100);
    // A's delta carrying the change is lost (a send into a partition that then heals).
    expect(h.drop((m) => m.from === "A" && m.msg.type === "snapshot")).toBe(1);
    h.deliver(isType("snapshot"));
    const want = { epoch: 0, version: h.node("A").treeVersion() };
    expect(h.node("B").heldOf("A")).not.toEqual(want);
    let rounds = 0;
    while (rounds < 20 && h.node("B").heldOf("A")?.version !== want.version) {
      h.gossip(1);
      rounds++;
    }
    // B's next poll (≤ 300 ms) acks A's next heartbeat; A's round after that re-sends the delta.
    // Waiting out the window instead took 6 rounds.
    expect(rounds).toBeLessThanOrEqual(4);
    expect(h.node("B").heldOf("A")).toEqual(want);
    expect(h.node("B").peerIndex().match("A", prompt(1, 1))).toBe(80);
  });

  it("caps a peer's advertised push-back and refuses oversized peer request ids", () => {
    const h = new Harness(["A", "B"], { maxPushBackMs: 1_000 });
    h.gossip(2);
    const header = {
      sender: "B",
      epoch: 0,
      version: 0,
      tokenCount: 0,
      capacity: 10,
      queueDepth: 99,
      pushBackMs: 3_600_000,
    };
    h.input("A", {
      type: "peer-message",
      from: "B",
      msg: { type: "snapshot", snapshot: { kind: "heartbeat", header } },
    });
    expect(h.node("A").peers()[0]?.pushBackUntil).toBe(h.now + 1_000);
    // A heartbeat of a version already held still refreshes what the peer advertises.
    expect(h.node("A").peers()[0]?.queueDepth).toBe(99);
    const msg = {
      type: "forward" as const,
      reqId: "x".repeat(600),
      attempt: 1,
      hops: 1,
      request: { id: "x", tokens: prompt(1, 1), maxTokens: 1 },
    };
    expect(h.input("A", { type: "peer-message", from: "B", msg })).toEqual([]);
    expect(h.node("A").stats().invalidMessages).toBe(1);
  });
});

describe("PrefixNode — engine-managed caches", () => {
  it("never evicts itself and mirrors the engine's reported sequences exactly", () => {
    const node = new PrefixNode(
      { id: "A", capacityTokens: 100, cacheMode: "engine-managed" },
      { now: () => 0, random: () => 0.5 },
      { checkInvariants: true },
    );
    node.start();
    const tokens = prompt(1, 1, 40, 10);
    const eff = node.handle({
      type: "client-request",
      reqId: "r",
      request: { id: "r", tokens, maxTokens: 1 },
    });
    const run = eff.find((e) => e.type === "engine-run");
    expect(run && run.type === "engine-run" && run.evicted).toEqual([]);
    const kept = [tokens.slice(0, 30), Uint32Array.from([7, 8, 9])];
    const done = node.handle({
      type: "engine-done",
      jobId: run && run.type === "engine-run" ? run.jobId : "",
      result: {
        text: "A",
        completionTokens: 1,
        promptTokens: 50,
        cachedTokens: 0,
        prefillMs: 1,
        decodeMs: 1,
        finishReason: "length",
        cachedSequences: kept,
      },
    });
    const reply = done.find((e) => e.type === "reply");
    expect(
      reply?.type === "reply" && reply.outcome.ok && reply.outcome.result.cachedSequences,
    ).toBeUndefined();
    expect(node.treeSize()).toBe(33);
    expect(node.localTree().match(tokens)).toBe(30);
  });

  it("takes an engine-managed cache's changes between runs (engine-cache-changed); node-managed ignores them", () => {
    const mk = (cacheMode: "engine-managed" | "node-managed") => {
      const n = new PrefixNode(
        { id: "A", capacityTokens: 100, cacheMode },
        { now: () => 0, random: () => 0.5 },
        { checkInvariants: true },
      );
      n.start();
      return n;
    };
    const seqs = [prompt(1, 1, 20, 5), Uint32Array.from([7, 8, 9])];
    const managed = mk("engine-managed");
    const v0 = managed.treeVersion();
    expect(managed.handle({ type: "engine-cache-changed", sequences: seqs })).toEqual([]);
    expect(managed.treeSize()).toBe(28);
    expect(managed.treeVersion()).toBeGreaterThan(v0);
    managed.handle({ type: "engine-cache-changed", sequences: [] });
    expect(managed.treeSize()).toBe(0);
    const lru = mk("node-managed");
    lru.handle({ type: "engine-cache-changed", sequences: seqs });
    expect(lru.treeSize()).toBe(0);
  });
});
