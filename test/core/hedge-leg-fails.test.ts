/**
 * A hedged request has two legs: its run here and the silent peer asked again (hedge.ts). One leg
 * failing does not end it while the other may still answer: our engine refusing the run for its load,
 * or failing it, leaves the request waiting on the peer (503 or 502 only if that leg ends unanswered
 * too), and the peer dropping the job leaves it waiting on our run. A prompt refused fails at once.
 */
import { describe, expect, it } from "vitest";
import { HEDGE_ASKS } from "../../src/core/node/hedge.js";
import { DAEMON_RECOVERY, type Harness, isType, type Mail, prompt, warmPair } from "./node-harness.js";

const ACK_MS = 250;
const toB = (m: Mail) => m.msg.type === "forward" && m.to === "B";

/**
 * r1 goes to B, is acked and run there; its answer and the probes for it are lost, so A runs r1
 * itself and asks B again meanwhile (that ask is still in the mailbox).
 */
function hedged(): Harness {
  const h = warmPair({
    ...DAEMON_RECOVERY,
    forwardAckTimeoutMs: ACK_MS,
    forwardTimeoutMs: 30_000,
  });
  h.input("A", {
    type: "client-request",
    reqId: "r1",
    request: { id: "r1", tokens: prompt(1, 1), maxTokens: 1 },
  });
  h.deliver(isType("forward"));
  h.deliver(isType("forward-ack"));
  h.finishRuns("B");
  expect(h.drop(isType("result"))).toBe(1);
  for (let t = 0; h.node("A").stats().fallbacks === 0; t += 10) {
    if (t > 10_000) throw new Error("no fallback within 10 s");
    h.drop(toB);
    h.advanceLive(10);
  }
  expect(h.members.get("A")?.runs.size).toBe(1);
  expect(h.mailbox.filter(toB)).toHaveLength(1);
  return h;
}

/** A's one run fails for its engine's load (a 503 with a wait, as its runtime says). */
function loadFailsAtA(h: Harness, retryAfterMs = 7_000): void {
  runFailsAtA(h, { error: "HTTP 503: busy", fault: "load", retryAfterMs });
}

/** A's one run fails, by `failure`'s fault. */
function runFailsAtA(h: Harness, failure: { error: string; fault: string; retryAfterMs?: number }): void {
  const runs = h.members.get("A")?.runs;
  const jobId = [...(runs?.keys() ?? [])][0] as string;
  runs?.clear();
  h.input("A", { type: "engine-failed", jobId, ...failure } as never);
}

/** Drops every re-ask of B until A answers r1 (the asks run out); returns how many were dropped. */
function losingAsks(h: Harness): number {
  let asks = 0;
  for (let t = 0; h.repliesFor("r1").length === 0; t += 10) {
    if (t > (HEDGE_ASKS + 3) * ACK_MS) throw new Error("no reply after the asks ran out");
    asks += h.drop(toB);
    h.advanceLive(10);
  }
  return asks;
}

const UNAVAILABLE = { ok: false, error: "engine: HTTP 503: busy", code: "unavailable", retryAfterMs: 7_000 };

describe("a hedged request outlives one failed leg", () => {
  it("our engine refuses the run for load: the peer's answer to the re-ask is the reply", () => {
    const h = hedged();
    loadFailsAtA(h);
    expect(h.repliesFor("r1")).toHaveLength(0);
    h.deliver(toB);
    h.deliver();
    expect(h.repliesFor("r1")).toHaveLength(1);
    expect(h.repliesFor("r1")[0]?.outcome.ok).toBe(true);
    expect(h.repliesFor("r1")[0]?.record).toMatchObject({ servedBy: "B" });
    expect(h.node("A").stats().hedgedAnswers).toBe(1);
  });

  it("our engine refuses it and every re-ask is lost: 503 once the asks are spent, not before", () => {
    const h = hedged();
    loadFailsAtA(h);
    const failedAt = h.now;
    expect(losingAsks(h)).toBe(HEDGE_ASKS); // the first one (sent before the run failed) included
    const heldMs = (h.repliesFor("r1")[0]?.record.finishedAt ?? failedAt) - failedAt;
    expect(heldMs).toBeGreaterThan(1_000);
    // The engine's wait counts from its refusal: the time held waiting on the peer is gone from it.
    expect(h.repliesFor("r1")[0]?.outcome).toEqual({ ...UNAVAILABLE, retryAfterMs: 7_000 - heldMs });
    h.advanceLive(4 * ACK_MS);
    expect(h.repliesFor("r1")).toHaveLength(1);
  });

  it("held past the engine's wait: the 503's wait is the least a Retry-After says, not the stale one", () => {
    const h = hedged();
    loadFailsAtA(h, 1_500);
    const failedAt = h.now;
    losingAsks(h);
    expect(h.now - failedAt).toBeGreaterThan(500);
    expect(h.repliesFor("r1")[0]?.outcome).toEqual({ ...UNAVAILABLE, retryAfterMs: 1_000 });
  });

  it("our engine refuses it, then the peer says it dropped the job: 503 at once", () => {
    const h = hedged();
    loadFailsAtA(h);
    h.drop(toB);
    const error = { type: "error", reqId: "r1", attempt: 1, error: "cancelled by origin", retryable: false };
    h.input("A", { type: "peer-message", from: "B", msg: error } as never);
    expect(h.repliesFor("r1")).toHaveLength(1);
    expect(h.repliesFor("r1")[0]?.outcome).toEqual(UNAVAILABLE);
  });

  it("our engine refuses it, then the peer restarts: 503 at once", () => {
    const h = hedged();
    loadFailsAtA(h);
    h.drop(toB);
    const failedAt = h.now;
    h.crash("B");
    h.restart("B");
    h.gossip(3);
    expect(h.repliesFor("r1")).toHaveLength(1);
    const heldMs = (h.repliesFor("r1")[0]?.record.finishedAt ?? failedAt) - failedAt;
    expect(h.repliesFor("r1")[0]?.outcome).toEqual({ ...UNAVAILABLE, retryAfterMs: 7_000 - heldMs });
  });

  it("our engine refuses it, then the peer leaves the membership: 503 at once", () => {
    const h = hedged();
    loadFailsAtA(h);
    h.drop(toB);
    h.apply("A", h.node("A").removePeer("B"));
    expect(h.repliesFor("r1")).toHaveLength(1);
    expect(h.repliesFor("r1")[0]?.outcome).toEqual(UNAVAILABLE);
  });

  it("our engine refuses it, then the peer says goodbye: 503 at once, its job cancelled", () => {
    const h = hedged();
    loadFailsAtA(h);
    h.drop(toB);
    h.input("A", { type: "peer-message", from: "B", msg: { type: "goodbye" } } as never);
    expect(h.repliesFor("r1")).toHaveLength(1);
    expect(h.repliesFor("r1")[0]?.outcome).toEqual(UNAVAILABLE);
    expect(h.mailbox.filter((m) => m.to === "B" && m.msg.type === "cancel").length).toBeGreaterThan(0);
  });

  it("our engine refuses it, then its client hangs up: settled unreplied, nothing more asked", () => {
    const h = hedged();
    loadFailsAtA(h);
    h.drop(toB);
    h.input("A", { type: "client-gone", reqId: "r1" });
    h.advanceLive(4 * ACK_MS);
    expect(h.repliesFor("r1")).toHaveLength(0);
    expect(h.mailbox.filter(toB)).toHaveLength(0);
  });

  it("our engine fails the run itself: the peer's answer is the reply; its asks lost, a 502", () => {
    const h = hedged();
    runFailsAtA(h, { error: "HTTP 500: crashed", fault: "engine" });
    expect(h.repliesFor("r1")).toHaveLength(0);
    h.deliver(toB);
    h.deliver();
    expect(h.repliesFor("r1")[0]?.record).toMatchObject({ servedBy: "B" });
    const lost = hedged();
    runFailsAtA(lost, { error: "HTTP 500: crashed", fault: "engine" });
    losingAsks(lost);
    expect(lost.repliesFor("r1")[0]?.outcome).toEqual({
      ok: false,
      error: "engine: HTTP 500: crashed",
      code: "engine",
    });
  });

  it("our engine refuses the prompt: a 400 at once, the peer's engine would refuse it too", () => {
    const h = hedged();
    runFailsAtA(h, { error: "HTTP 400: prompt too long", fault: "input" });
    expect(h.repliesFor("r1")[0]?.outcome).toMatchObject({ ok: false, code: "invalid" });
  });

  it("the peer drops the job while our run goes on: our run answers", () => {
    const h = hedged();
    h.drop(toB);
    const error = { type: "error", reqId: "r1", attempt: 1, error: "cancelled by origin", retryable: false };
    h.input("A", { type: "peer-message", from: "B", msg: error } as never);
    expect(h.repliesFor("r1")).toHaveLength(0);
    h.finishRuns("A");
    expect(h.repliesFor("r1")).toHaveLength(1);
    expect(h.repliesFor("r1")[0]?.record).toMatchObject({ servedBy: "A" });
  });
});
