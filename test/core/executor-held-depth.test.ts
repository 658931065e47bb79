/**
 * The queue depth a node tells its peers (offload): a run far past the mean service time counts as
 * the jobs it still holds the engine for, so a peer's long generation is not read as an idle engine.
 */
import { describe, expect, it } from "vitest";
import type { EngineResult } from "../../src/core/engine.js";
import { resolveNodeConfig } from "../../src/core/node/config.js";
import { Executor, type JobSpec } from "../../src/core/node/executor.js";
import { MAX_REPORTED_DEPTH } from "../../src/core/node/peer-load.js";
import type { Effect } from "../../src/core/node/types.js";
import { prompt } from "./node-harness.js";

function job(id: string, maxTokens: number): JobSpec {
  return {
    kind: "client",
    reqId: id,
    from: undefined,
    attempt: 0,
    request: { id, tokens: prompt(1, 1), maxTokens },
  };
}

function started(out: Effect[]): string {
  const e = out.find((x) => x.type === "engine-run");
  if (e?.type !== "engine-run") throw new Error("no run started");
  return e.jobId;
}

/** An executor that timed one 100 ms run (its mean service time), then started a long one at 100. */
function holding(offload: boolean): Executor {
  const config = resolveNodeConfig({ id: "A", peers: [], capacityTokens: 100_000, offload });
  const ex = new Executor(config, "A", true);
  let out: Effect[] = [];
  ex.enqueue(job("a", 1), 0, out);
  const result: EngineResult = {
    text: "A",
    completionTokens: 1,
    promptTokens: prompt(1, 1).length,
    cachedTokens: 0,
    prefillMs: 90,
    decodeMs: 10,
    finishReason: "stop",
  };
  ex.done(started(out), result, 100);
  out = [];
  ex.enqueue(job("long", 30_000), 100, out);
  started(out);
  return ex;
}

describe("the queue depth peers are told", () => {
  it("counts a run far past the mean service time as the jobs it holds the engine for", () => {
    const ex = holding(true);
    expect(ex.queueDepth()).toBe(1);
    // An ordinary long run (a few service times) keeps the plain depth.
    expect(ex.reportedDepth(100 + 300)).toBe(1);
    // 50 service times in: expected to run as long again.
    expect(ex.reportedDepth(100 + 5_000)).toBe(1 + 49);
  });

  it("is the plain depth without offload (the paper's node)", () => {
    const ex = holding(false);
    expect(ex.reportedDepth(100 + 5_000)).toBe(ex.queueDepth());
  });

  it("stays within what peers accept on the wire, however long the run held and the queue", () => {
    const ex = holding(true);
    // maxQueue may be up to the wire's bound itself: a deep queue plus a held engine must not pass it
    // (a gossip header or ack above it is refused whole by every peer).
    ex.queueDepth = () => MAX_REPORTED_DEPTH - 10;
    const d = ex.reportedDepth(100 + 100_000_000);
    expect(d).toBe(MAX_REPORTED_DEPTH);
    const plain = holding(false);
    plain.queueDepth = () => MAX_REPORTED_DEPTH + 64;
    expect(plain.reportedDepth(100)).toBe(MAX_REPORTED_DEPTH);
  });

  it("is the wait a forward's deadline and an ETA are judged by", () => {
    const ex = holding(true);
    const now = 100 + 5_000;
    // The held run counts as its 49 jobs, then half a service time (one slot).
    expect(ex.expectedWaitMs(now)).toBeCloseTo(49.5 * 100, 6);
    const q = { id: "q", tokens: prompt(2, 1), maxTokens: 1 };
    expect(ex.etaMs(q, now)).toBeGreaterThan(49.5 * 100);
    expect(ex.loadNow(now).expectedWaitMs).toBe(ex.expectedWaitMs(now));
    // An ordinary long run, or no offload: half a service time.
    expect(ex.expectedWaitMs(100 + 300)).toBeCloseTo(50, 6);
    expect(holding(false).expectedWaitMs(now)).toBeCloseTo(50, 6);
  });

  it("leaves routing's view of self at the jobs (held depth there measured worse: BENCHMARKS.md)", () => {
    const ex = holding(true);
    const now = 100 + 5_000;
    expect(ex.selfView("A", { id: "q", tokens: prompt(2, 1), maxTokens: 1 }, now).queueDepth).toBe(1);
    expect(ex.pushBackMs()).toBe(0);
  });
});
