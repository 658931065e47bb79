/** A PrefixNode over an engine-managed cache: its tree mirrors the sequences the engine reports. */
import { describe, expect, it } from "vitest";
import { PrefixNode } from "../../src/core/node/node.js";
import { prompt } from "./node-harness.js";

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
