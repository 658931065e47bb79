import { describe, expect, it } from "vitest";
import { InvariantError, invariant } from "../../src/core/invariant.js";
import { resolveNodeConfig } from "../../src/core/node/config.js";
import { Serving } from "../../src/core/node/serving.js";
import type { Effect } from "../../src/core/node/types.js";
import { Harness, prompt } from "./node-harness.js";

describe("invariant", () => {
  it("passes when the condition holds and throws InvariantError, with the message, when not", () => {
    expect(() => invariant(true, "never")).not.toThrow();
    expect(() => invariant(0, "queue depth went negative")).toThrow(InvariantError);
    expect(() => invariant(false, () => `built ${1 + 1} late`)).toThrow(/invariant violated: built 2 late/);
  });

  it("builds a lazy message only on failure", () => {
    let built = 0;
    invariant(true, () => `${++built}`);
    expect(built).toBe(0);
  });

  it("a broken invariant inside the node surfaces from handle(), not swallowed", () => {
    const h = new Harness(["A"]);
    // Tampering behind the executor's back (a test only): a pin on A's tree that no job holds.
    h.node("A").localTree().lock(prompt(1, 1));
    expect(() => h.client("A", "r1", prompt(2, 1))).toThrow(InvariantError);
  });

  it("a forward answered twice breaks serving's exactly-once answer", () => {
    const serving = new Serving(resolveNodeConfig({ id: "B", peers: ["A"], capacityTokens: 1_000 }));
    const out: Effect[] = [];
    const request = { id: "r1", tokens: prompt(1, 1), maxTokens: 1 };
    const msg = { type: "forward", reqId: "r1", attempt: 1, hops: 1, request } as const;
    const idle = { full: false, expectedWaitMs: undefined, admissionWaitMs: undefined };
    const verdict = serving.admit("A", msg, idle, out);
    expect(verdict?.kind).toBe("accept");
    const job = { reqId: "r1", from: "A", attempt: 1, key: verdict?.key };
    const result = {
      text: "A",
      completionTokens: 1,
      promptTokens: 80,
      cachedTokens: 0,
      prefillMs: 1,
      decodeMs: 1,
      finishReason: "length" as const,
    };
    const timing = { servedBy: "B", queueMs: 0, prefillMs: 1, decodeMs: 1 };
    serving.answered(job, result, timing, 0, out);
    expect(out.filter((e) => e.type === "send" && e.msg.type === "result")).toHaveLength(1);
    expect(() => serving.answered(job, result, timing, 0, out)).toThrow(/answered twice/);
  });

  it("an engine whose hit differs from the tree's match breaks tree = engine cache", () => {
    const h = new Harness(["A"]);
    h.warm("A", "r1", prompt(1, 1));
    h.client("A", "r2", prompt(1, 2));
    h.finishRuns("A"); // the engine reused the shared prefix the tree pinned: consistent
    expect(h.repliesFor("r2")[0]?.record.actualHitTokens).toBe(64);
    // The engine loses its cache behind the node's back (a test only): its next hit is 0, not 64.
    h.members.get("A")?.engine.cache.clear();
    h.client("A", "r3", prompt(1, 3));
    expect(() => h.finishRuns("A")).toThrow(/engine reused 0 cached tokens, the tree held 64/);
  });
});
