/**
 * A request that lost forward attempts to timeouts (`maxTimedOutAttempts`) runs here as a priority
 * job: ahead of every job that reached this node after it did, behind those that came before. At the
 * head, a burst of them (a lossy cold start) starved requests queued before them all.
 */
import { describe, expect, it } from "vitest";
import type { EngineResult } from "../../src/core/engine.js";
import { resolveNodeConfig } from "../../src/core/node/config.js";
import { Executor, type JobSpec } from "../../src/core/node/executor.js";
import type { Effect } from "../../src/core/node/types.js";
import { prompt } from "./node-harness.js";

function job(id: string, q: number, extra: Partial<JobSpec> = {}): JobSpec {
  return {
    kind: "client",
    reqId: id,
    from: undefined,
    attempt: 0,
    request: { id, tokens: prompt(q, q), maxTokens: 1 },
    ...extra,
  };
}

/** Request ids in the order the executor starts them, with jobs enqueued as `steps` say. */
function order(steps: [now: number, spec: JobSpec][]): string[] {
  const ex = new Executor(resolveNodeConfig({ id: "A", peers: [], capacityTokens: 100_000 }), "A", true);
  const started: { jobId: string; reqId: string }[] = [];
  const take = (out: Effect[]) => {
    for (const e of out) if (e.type === "engine-run") started.push({ jobId: e.jobId, reqId: e.request.id });
  };
  let now = 0;
  for (const [t, spec] of steps) {
    now = t;
    const out: Effect[] = [];
    ex.enqueue(spec, now, out);
    take(out);
  }
  for (let i = 0; i < started.length; i++) {
    const s = started[i] as { jobId: string; reqId: string };
    const tokens = prompt(Number(s.reqId.slice(1)), Number(s.reqId.slice(1))).length;
    const result: EngineResult = {
      text: "A",
      completionTokens: 1,
      promptTokens: tokens,
      cachedTokens: 0,
      prefillMs: 1,
      decodeMs: 1,
      finishReason: "stop",
    };
    ex.done(s.jobId, result, ++now);
    const out: Effect[] = [];
    ex.pump(now, out);
    take(out);
  }
  return started.map((s) => s.reqId);
}

describe("a priority job's place in the queue", () => {
  it("goes ahead of the jobs that arrived after its request, behind the older ones", () => {
    const steps: [number, JobSpec][] = [
      [0, job("r1", 1)], // runs at once
      [10, job("r2", 2)],
      [30, job("r3", 3)],
      [40, job("r4", 4, { priority: true, since: 20 })],
    ];
    expect(order(steps)).toEqual(["r1", "r2", "r4", "r3"]);
  });

  it("runs first when its request is older than every waiting job", () => {
    const steps: [number, JobSpec][] = [
      [0, job("r1", 1)],
      [10, job("r2", 2)],
      [30, job("r3", 3)],
      [40, job("r4", 4, { priority: true, since: 5 })],
      [50, job("r5", 5, { priority: true, since: 1 })],
    ];
    expect(order(steps)).toEqual(["r1", "r5", "r4", "r2", "r3"]);
  });

  it("a burst of priority jobs never passes a job queued before all of them", () => {
    const steps: [number, JobSpec][] = [
      [0, job("r1", 1)],
      [10, job("r2", 2)],
    ];
    for (let i = 3; i < 10; i++) steps.push([10 + i, job(`r${i}`, i, { priority: true, since: 10 + i })]);
    const got = order(steps);
    expect(got.indexOf("r2")).toBe(1);
    expect(got).toHaveLength(9);
  });
});
