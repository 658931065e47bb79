/**
 * A peer's refusal of a forward that does not fit it (its context or max_tokens ceiling) at the
 * origin (peer-limits.ts): no mark against the peer, and requests that would not fit it are routed
 * elsewhere from then on, while those that fit still go to it.
 */
import { describe, expect, it } from "vitest";
import { exceedsLimits, LIMITS_TTL_MS, PeerLimits, saidLimits } from "../../src/core/node/peer-limits.js";
import type { ForwardLimits, PeerMessageOf } from "../../src/core/node/types.js";
import { forwardsIn, Harness, prompt } from "./node-harness.js";

const refusal = (error: string, limits?: unknown): PeerMessageOf<"error"> =>
  ({ type: "error", reqId: "r", attempt: 0, error, retryable: true, limits }) as PeerMessageOf<"error">;

describe("peer limits: the pure pieces", () => {
  it("reads the limits a refusal says, each a whole positive count, or an older node's context text", () => {
    expect(saidLimits(refusal("x", { maxTokens: 64, contextTokens: 4096 }))).toEqual({
      maxTokens: 64,
      contextTokens: 4096,
    });
    expect(saidLimits(refusal("x", { maxTokens: 64, contextTokens: -1 }))).toEqual({ maxTokens: 64 });
    expect(saidLimits(refusal("x", { maxTokens: 1.5 }))).toBeUndefined();
    expect(saidLimits(refusal("x", {}))).toBeUndefined();
    expect(saidLimits(refusal("overloaded"))).toBeUndefined();
    const legacy = "prompt (90 tokens) + maxTokens (11) exceeds this node's context of 100 tokens";
    expect(saidLimits(refusal(legacy))).toEqual({ contextTokens: 100 });
  });

  it("a request exceeds the ceiling by its maxTokens, the context by prompt + maxTokens", () => {
    const r = (n: number, maxTokens: number, tokenizer?: string) => ({
      tokens: new Uint32Array(n),
      maxTokens,
      ...(tokenizer ? { tokenizer } : {}),
    });
    const l: ForwardLimits = { maxTokens: 64, contextTokens: 100 };
    expect(exceedsLimits(r(10, 64), l)).toBe(false);
    expect(exceedsLimits(r(10, 65), l)).toBe(true);
    expect(exceedsLimits(r(40, 60), l)).toBe(false);
    expect(exceedsLimits(r(41, 60), l)).toBe(true);
    // Another model's tokens are counted again at the peer: up to FOREIGN_TOKENS_SLACK (2) × ours.
    expect(exceedsLimits(r(20, 60, "other"), l)).toBe(false);
    expect(exceedsLimits(r(21, 60, "other"), l)).toBe(true);
    let now = 0;
    const held = new PeerLimits(() => now);
    expect(held.fits("B", r(10, 1000))).toBe(true);
    held.learn("B", { contextTokens: 100 });
    held.learn("B", { maxTokens: 64 });
    expect(held.of("B")).toEqual(l);
    expect(held.fits("B", r(10, 65))).toBe(false);
    held.forget("B");
    expect(held.fits("B", r(10, 65))).toBe(true);
    // Believed for LIMITS_TTL_MS from the last refusal, then asked again.
    held.learn("B", { maxTokens: 64 });
    now = LIMITS_TTL_MS - 1;
    expect(held.fits("B", r(10, 65))).toBe(false);
    now = LIMITS_TTL_MS;
    expect(held.fits("B", r(10, 65))).toBe(true);
    expect(held.of("B")).toBeUndefined();
  });
});

/** A, B with peer trust; B holds topics 1-6, so A forwards their prompts to B. */
function setup(): Harness {
  const h = new Harness(["A", "B"], { peerTrust: true, answerProbes: false });
  for (let t = 1; t <= 6; t++) h.warm("B", `warm${t}`, prompt(t, 0));
  h.gossip(3);
  return h;
}

/** A client request at A; what A forwards to B is answered by B with `msg`'s refusal instead. */
function refusedByB(
  h: Harness,
  reqId: string,
  topic: number,
  maxTokens: number,
  error: string,
  limits?: unknown,
) {
  expect(forwardsIn(h.client("A", reqId, prompt(topic, 1), maxTokens))).toEqual(["B"]);
  const fwd = h.mailbox.find((m) => m.to === "B" && m.msg.type === "forward");
  h.drop((m) => m === fwd);
  const attempt = fwd?.msg.type === "forward" ? fwd.msg.attempt : -1;
  const msg = { ...refusal(error, limits), reqId, attempt };
  return h.input("A", { type: "peer-message", from: "B", msg });
}

const viewOfB = (h: Harness) => h.node("A").peers()[0];

describe("peer limits at the origin", () => {
  it("a refusal for B's ceiling costs B nothing, and A sends B only what fits from then on", () => {
    const h = setup();
    const eff = refusedByB(h, "r1", 1, 100, "maxTokens (100) exceeds this node's max_tokens ceiling of 64", {
      maxTokens: 64,
      contextTokens: 100_000,
    });
    expect(eff.some((e) => e.type === "engine-run")).toBe(true); // falls back: runs here
    // Refused three times over would open a breaker; one refusal for fit is not even a back-off.
    expect(viewOfB(h)?.trust).toMatchObject({ state: "closed", failures: 0, refusals: 0 });
    expect(viewOfB(h)?.limits).toEqual({ maxTokens: 64, contextTokens: 100_000 });
    for (const [i, topic] of [2, 3, 4, 5].entries())
      expect(forwardsIn(h.client("A", `big${i}`, prompt(topic, 2), 100))).toEqual([]);
    expect(forwardsIn(h.client("A", "small", prompt(6, 2), 64))).toEqual(["B"]);
    expect(h.node("A").stats().forwarded).toBe(2);
  });

  it("an older node's context refusal is read from its text; a refusal its own limits belie counts", () => {
    const h = setup();
    refusedByB(
      h,
      "r1",
      1,
      100,
      "prompt (80 tokens) + maxTokens (100) exceeds this node's context of 128 tokens",
    );
    expect(viewOfB(h)?.trust).toMatchObject({ failures: 0 });
    expect(viewOfB(h)?.limits).toEqual({ contextTokens: 128 });
    expect(forwardsIn(h.client("A", "big", prompt(2, 2), 100))).toEqual([]);
    // 80 + 40 fits 128: B's refusal "for fit" is an error like any other.
    refusedByB(h, "r2", 3, 40, "maxTokens (40) exceeds this node's max_tokens ceiling of 64", {
      maxTokens: 64,
    });
    expect(viewOfB(h)?.trust).toMatchObject({ failures: 1 });
  });

  it("a restarted peer's limits are forgotten (it may come back with others)", () => {
    const h = setup();
    refusedByB(h, "r1", 1, 100, "x", { maxTokens: 64 });
    expect(viewOfB(h)?.limits).toEqual({ maxTokens: 64 });
    h.restart("B");
    h.gossip(2);
    expect(viewOfB(h)?.limits).toBeUndefined();
  });
});

describe("peer limits: another model's tokens", () => {
  it("a refusal whose stated ceiling the request does not exceed counts, even for another model's tokens", () => {
    const h = setup();
    const refuseForeign = (reqId: string, topic: number, limits: ForwardLimits) => {
      const request = { id: reqId, tokens: prompt(topic, 1), maxTokens: 10, tokenizer: "other" };
      expect(forwardsIn(h.input("A", { type: "client-request", reqId, request }))).toEqual(["B"]);
      const fwd = h.mailbox.find((m) => m.to === "B" && m.msg.type === "forward");
      h.drop((m) => m === fwd);
      const attempt = fwd?.msg.type === "forward" ? fwd.msg.attempt : -1;
      h.input("A", { type: "peer-message", from: "B", msg: { ...refusal("x", limits), reqId, attempt } });
    };
    // 10 is within the ceiling B states, and B states no context: this is no refusal for fit.
    refuseForeign("f1", 1, { maxTokens: 1000 });
    expect(viewOfB(h)?.trust).toMatchObject({ failures: 1 });
    expect(viewOfB(h)?.limits).toBeUndefined();
    // A context our count of 80 + 10 could exceed in B's tokens: excused, and B is sent no more such
    // requests (a peer stating a small context to refuse for free loses them all).
    refuseForeign("f2", 2, { contextTokens: 150 });
    expect(viewOfB(h)?.trust).toMatchObject({ failures: 1 });
    expect(viewOfB(h)?.limits).toEqual({ contextTokens: 150 });
    const again = { id: "f3", tokens: prompt(3, 1), maxTokens: 10, tokenizer: "other" };
    expect(forwardsIn(h.input("A", { type: "client-request", reqId: "f3", request: again }))).toEqual([]);
  });

  it("a context no tokenizer could make the request exceed is no refusal for fit", () => {
    const h = setup();
    const reqId = "g1";
    const request = { id: reqId, tokens: prompt(1, 1), maxTokens: 10, tokenizer: "other" };
    expect(forwardsIn(h.input("A", { type: "client-request", reqId, request }))).toEqual(["B"]);
    const fwd = h.mailbox.find((m) => m.to === "B" && m.msg.type === "forward");
    h.drop((m) => m === fwd);
    const attempt = fwd?.msg.type === "forward" ? fwd.msg.attempt : -1;
    // 80 tokens of ours are at most 160 of B's: + 10 fits a context of 1000.
    h.input("A", {
      type: "peer-message",
      from: "B",
      msg: { ...refusal("x", { contextTokens: 1000 }), reqId, attempt },
    });
    expect(viewOfB(h)?.trust).toMatchObject({ failures: 1 });
    expect(viewOfB(h)?.limits).toBeUndefined();
  });
});
