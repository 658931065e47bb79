/** Client deadlines: routing ranks only nodes expected to answer in time; admission refuses early. */
import { describe, expect, it } from "vitest";
import { deadlineAt, expectedCompletionMs, withinDeadline } from "../../src/core/node/deadline.js";
import type { Candidate } from "../../src/core/node/policies/index.js";
import { Harness, isType } from "./node-harness.js";

const k = { prefillFixedMs: 20, prefillMsPerToken: 0.5, serviceMs: 100, rttPriorMs: 250, samples: 10 };
const self: Candidate = {
  id: "a",
  self: true,
  estimatedMatch: 0,
  estimateAgeMs: 0,
  queueDepth: 0,
  rttMs: 0,
  capacityTokens: 1e4,
};
const peer = (over: Partial<Candidate>): Candidate => ({
  id: "b",
  self: false,
  estimatedMatch: 0,
  estimateAgeMs: 0,
  queueDepth: 0,
  rttMs: 10,
  capacityTokens: 1e4,
  ...over,
});
const request = (deadlineMs?: number) => ({
  id: "r",
  tokens: new Uint32Array(1000),
  maxTokens: 10,
  ...(deadlineMs === undefined ? {} : { deadlineMs }),
});

describe("deadline routing", () => {
  it("expected completion: RTT + queue + uncached prefill + max_tokens of decode, scaled by advertised speed", () => {
    // 10 + 0 + 20 + 0.5 × 200 + 10 × 2 = 150 ms.
    expect(expectedCompletionMs(peer({ estimatedMatch: 800 }), request(), k, 2)).toBeCloseTo(150, 9);
    // Two queued ahead (reported now): + 200 ms.
    expect(
      expectedCompletionMs(peer({ estimatedMatch: 800, queueDepth: 2, queueAgeMs: 0 }), request(), k, 2),
    ).toBeCloseTo(350, 9);
    // A peer advertising 3× our costs (and its own decode speed): 10 + 3 × 120 + 10 × 6.
    const ours = { fixedMs: 20, msPerUncached: 0.5, msPerCached: 0, msPerOutput: 2 };
    const slow = { fixedMs: 60, msPerUncached: 1.5, msPerCached: 0, msPerOutput: 6 };
    expect(
      expectedCompletionMs(
        peer({ estimatedMatch: 800, advertisedCosts: slow }),
        request(),
        { ...k, engine: ours },
        2,
      ),
    ).toBeCloseTo(430, 9);
  });

  it("keeps self and the peers that fit; no deadline keeps everyone", () => {
    const fast = peer({ id: "b", estimatedMatch: 800 });
    const busy = peer({ id: "c", estimatedMatch: 900, queueDepth: 5, queueAgeMs: 0 });
    const all = [self, fast, busy];
    expect(withinDeadline(all, request(300), k, 2, 300).map((c) => c.id)).toEqual(["a", "b"]);
    expect(withinDeadline(all, request(100), k, 2, 100).map((c) => c.id)).toEqual(["a"]);
    expect(withinDeadline(all, request(), k, 2, Number.POSITIVE_INFINITY)).toBe(all);
  });

  it("takes only a sane client deadline", () => {
    expect(deadlineAt(request(500), 1000)).toBe(1500);
    for (const bad of [0, -5, Number.NaN, 4_000_000])
      expect(deadlineAt(request(bad), 0)).toBe(Number.POSITIVE_INFINITY);
    expect(deadlineAt(request(), 0)).toBe(Number.POSITIVE_INFINITY);
  });
});

describe("deadline admission (one node, then a peer)", () => {
  const tokens = (seed: number) => Uint32Array.from({ length: 400 }, (_, i) => seed * 1000 + i);

  it("refuses at once, 'deadline', with Retry-After, a request that cannot finish in time behind the queue", () => {
    const h = new Harness(["a"], { policy: "cost-aware" });
    // A timed run gives a measured service time; then three requests queue behind a fourth running.
    h.client("a", "warm", tokens(1));
    h.advance(1000);
    h.finishRuns();
    for (let i = 0; i < 4; i++) h.client("a", `q${i}`, tokens(10 + i));
    h.input("a", {
      type: "client-request",
      reqId: "late",
      request: { ...request(200), id: "late", tokens: tokens(50) },
    });
    const [r] = h.repliesFor("late");
    expect(r?.outcome.ok).toBe(false);
    if (r && !r.outcome.ok) {
      expect(r.outcome.code).toBe("deadline");
      expect(r.outcome.error).toMatch(/^deadline: no node is expected to answer within the 200 ms left/);
      expect(r.outcome.retryAfterMs).toBeGreaterThanOrEqual(1000);
    }
    expect(h.node("a").stats().clientDeadlineRefusals).toBe(1);
    // A generous deadline is admitted (queued) like any request.
    h.input("a", {
      type: "client-request",
      reqId: "ok",
      request: { ...request(600_000), id: "ok", tokens: tokens(51) },
    });
    expect(h.repliesFor("ok")).toHaveLength(0);
  });

  it("the forward carries what is left of the deadline, less the round trip", () => {
    const h = new Harness(["a", "b"], { policy: "cost-aware" });
    h.warm("b", "w", tokens(7), 500);
    h.gossip();
    h.input("a", {
      type: "client-request",
      reqId: "f",
      request: { ...request(800), id: "f", tokens: tokens(7) },
    });
    const fwd = h.mailbox.find(isType("forward"));
    expect(fwd).toBeDefined();
    const msg = fwd?.msg;
    const d = msg?.type === "forward" ? (msg.deadlineMs ?? Number.POSITIVE_INFINITY) : Number.NaN;
    // The harness's forward timeout (1 s) is longer: the client's 800 ms bound the budget.
    expect(d).toBeLessThanOrEqual(800);
    expect(d).toBeGreaterThan(500);
  });
});
