/**
 * Admission by expected wait (`maxWaitMs`) holds for every job a node queues, not only its own
 * clients': waits are the queued jobs' priced runs (a shared prefix priced once), a forward carries
 * what is left of its origin's bound (`waitMs`) and is refused past that or the server's own bound.
 */
import { describe, expect, it } from "vitest";
import { resolveNodeConfig } from "../../src/core/node/config.js";
import { Executor } from "../../src/core/node/executor.js";
import type { Effect, PeerMessage } from "../../src/core/node/types.js";
import { PAPER_H100_QWEN05B } from "../../src/engines/sim/profiles.js";
import { calibrationSamples } from "../../src/sim/calibration.js";
import { Harness, isType, prompt } from "./node-harness.js";

const BOUND = 3_000;
/** Prompts whose uncached prefill (≈ 2 s on the paper's profile) is most of a run. */
const long = (topic: number, q: number) => prompt(topic, q, 1_000, 16);

function forward(reqId: string, tokens: Uint32Array, waitMs?: number): PeerMessage {
  const request = { id: reqId, tokens, maxTokens: 1 };
  return {
    type: "forward",
    reqId,
    attempt: 1,
    hops: 1,
    request,
    ...(waitMs === undefined ? {} : { waitMs }),
  };
}

function calibrated(ids: string[], maxWaitMs = BOUND): Harness {
  const h = new Harness(ids, { maxWaitMs }, 100_000);
  for (const id of ids) h.node(id).calibrate(calibrationSamples(PAPER_H100_QWEN05B));
  return h;
}

const answer = (effects: Effect[]) =>
  effects.flatMap((e) =>
    e.type === "send" && (e.msg.type === "error" || e.msg.type === "forward-ack") ? [e.msg] : [],
  );

describe("admission by expected wait, for every queued job", () => {
  it("prices each queued job: an uncached prompt costs its prefill, a prefix queued ahead is a hit", () => {
    const distinct = calibrated(["A", "B"]);
    distinct.client("B", "r0", long(1, 1)); // runs: ≈ 2.2 s
    distinct.client("B", "r1", long(2, 1)); // waits ≈ 2.2 s (within the bound), then ≈ 2.2 s more
    const refused = answer(
      distinct.input("B", { type: "peer-message", from: "A", msg: forward("f", long(3, 1)) }),
    );
    expect(refused).toMatchObject([{ type: "error", retryable: true }]);
    expect((refused[0] as { error: string }).error).toMatch(
      /^overloaded: expected wait \d+ ms exceeds 3000 ms/,
    );

    // The same queue, but r1 shares r0's prefix: it will hit what r0 caches, so little waits ahead.
    const shared = calibrated(["A", "B"]);
    shared.client("B", "r0", long(1, 1));
    shared.client("B", "r1", long(1, 2));
    const accepted = answer(
      shared.input("B", { type: "peer-message", from: "A", msg: forward("f", long(3, 1)) }),
    );
    expect(accepted).toMatchObject([{ type: "forward-ack" }]);
  });

  it("refuses a forward past what is left of its origin's bound, though within its own", () => {
    const h = calibrated(["A", "B"]);
    h.client("B", "r0", long(1, 1)); // ≈ 2.2 s of run ahead of anything queued now
    const tight = answer(
      h.input("B", { type: "peer-message", from: "A", msg: forward("f1", long(2, 1), 1_000) }),
    );
    expect(tight).toMatchObject([{ type: "error", retryable: true }]);
    expect((tight[0] as { error: string }).error).toMatch(/exceeds 1000 ms/);
    const roomy = answer(
      h.input("B", { type: "peer-message", from: "A", msg: forward("f2", long(2, 1), 2_900) }),
    );
    expect(roomy).toMatchObject([{ type: "forward-ack" }]);
    // A nonsense budget from a peer counts as none: the server's own bound decides.
    const bogus = answer(
      h.input("B", { type: "peer-message", from: "A", msg: forward("f3", long(4, 1), -5) }),
    );
    expect(bogus).toMatchObject([{ type: "error" }]);
  });

  it("sends what is left of its own bound with each forward", () => {
    const h = calibrated(["A", "B"]);
    h.warm("B", "w", long(1, 1));
    h.gossip();
    h.mailbox.length = 0;
    h.client("A", "q", long(1, 2)); // B holds its prefix: forwarded
    const sent = h.mailbox.filter(isType("forward"));
    expect(sent).toHaveLength(1);
    const waitMs = (sent[0]?.msg as { waitMs?: number } | undefined)?.waitMs ?? Number.NaN;
    expect(waitMs).toBeLessThanOrEqual(BOUND);
    expect(waitMs).toBeGreaterThan(BOUND - 100);
    // Without a bound, forwards carry none (the paper's message).
    const off = calibrated(["A", "B"], 0);
    off.warm("B", "w", long(1, 1));
    off.gossip();
    off.mailbox.length = 0;
    off.client("A", "q", long(1, 2));
    expect(off.mailbox.filter(isType("forward")).map((m) => "waitMs" in m.msg)).toEqual([false]);
  });
});

describe("a job leaving the queue without running", () => {
  const executor = () => {
    const config = resolveNodeConfig({ id: "B", peers: [], capacityTokens: 100_000, maxWaitMs: BOUND });
    const ex = new Executor(config, "B", true);
    ex.calibrate(calibrationSamples(PAPER_H100_QWEN05B));
    return ex;
  };
  const request = (topic: number, q: number) => ({
    id: `t${topic}q${q}`,
    tokens: long(topic, q),
    maxTokens: 1,
  });
  const client = (reqId: string, topic: number, q: number) => ({
    kind: "client" as const,
    reqId,
    from: undefined,
    attempt: 0,
    request: request(topic, q),
  });
  const fwd = (reqId: string, topic: number, q: number) => ({
    kind: "forward" as const,
    reqId,
    from: "A",
    attempt: 1,
    request: request(topic, q),
    key: `key-${reqId}`,
  });

  it("prices again the jobs behind it that counted on its prefix: the wait is the queue's without it", () => {
    // The queue without the job: one running, one waiting with its prefix uncached.
    const without = executor();
    without.enqueue(client("r0", 1, 1), 0, []);
    without.enqueue(client("d", 2, 2), 0, []);
    const expected = without.admissionWaitMs(0) as number;

    // Moved by offload: `d` was priced as a hit on the prefix `x` would have cached.
    const moved = executor();
    moved.enqueue(client("r0", 1, 1), 0, []);
    moved.enqueue(client("x", 2, 1), 0, []);
    moved.enqueue(client("d", 2, 2), 0, []);
    const before = moved.admissionWaitMs(0) as number;
    expect(moved.takeQueued("x")).toBe(true);
    expect(moved.admissionWaitMs(0)).toBeCloseTo(expected, 6);
    // Leaving never makes the jobs behind it wait longer: its own run held that prefill.
    expect(expected).toBeLessThan(before);

    // Cancelled by its origin: the same.
    const cancelled = executor();
    cancelled.enqueue(client("r0", 1, 1), 0, []);
    cancelled.enqueue(fwd("x", 2, 1), 0, []);
    cancelled.enqueue(fwd("d", 2, 2), 0, []);
    expect(cancelled.cancelQueued("key-x")).toBe(true);
    expect(cancelled.admissionWaitMs(0)).toBeCloseTo(expected, 6);
  });
});

describe("offload's own wait (routing's view of self)", () => {
  it("counts the jobs queued here, not only the running one", () => {
    const config = resolveNodeConfig({ id: "A", peers: [], capacityTokens: 100_000, offload: true });
    const ex = new Executor(config, "A", true);
    const out: Effect[] = [];
    const request = (i: number) => ({ id: `r${i}`, tokens: long(i, 1), maxTokens: 1 });
    const job = (i: number) => ({
      kind: "client" as const,
      reqId: `r${i}`,
      from: undefined,
      attempt: 0,
      request: request(i),
    });
    ex.enqueue(job(0), 0, out);
    // One timed run: the mean service time is known from here on.
    const run = out.find((e) => e.type === "engine-run");
    if (run?.type !== "engine-run") throw new Error("no run started");
    const result = {
      text: "A",
      completionTokens: 1,
      promptTokens: 1016,
      cachedTokens: 0,
      prefillMs: 2_000,
      decodeMs: 5,
      finishReason: "length" as const,
    };
    ex.done(run.jobId, result, 2_005);
    for (let i = 1; i <= 4; i++) ex.enqueue(job(i), 2_005, out);
    const view = ex.selfView("A", request(9), 2_005);
    // One running (≈ a service time left) and three waiting: about four service times.
    expect(view.waitMs).toBeGreaterThan(3 * 2_000);
  });
});
