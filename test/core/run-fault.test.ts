/**
 * A failed engine run says whose fault it is (`engine-failed`'s `fault`): the client's reply follows
 * it (a refused prompt is `invalid`, the engine's load `unavailable` with its wait, else `engine`),
 * and so does a forward's error — a peer's engine's refusal of the prompt or its load falls back, as
 * any failed forward does, with a back-off and no failure mark against the peer: a peer's word does
 * not end a request (a lying peer would fail every one so); the last engine asked answers.
 */
import { describe, expect, it } from "vitest";
import type { RunFault } from "../../src/core/node/types.js";
import { forwardsIn, Harness, isType, prompt } from "./node-harness.js";

/** The one job `id` runs now (its engine run's id). */
function onlyRun(h: Harness, id: string): string {
  const runs = [...(h.members.get(id)?.runs.keys() ?? [])];
  expect(runs).toHaveLength(1);
  return runs[0] as string;
}

/** Fails `id`'s one run with `fault` (and a wait, for load), as its runtime would. */
function failRun(h: Harness, id: string, fault: RunFault | undefined): void {
  const jobId = onlyRun(h, id);
  h.members.get(id)?.runs.clear();
  const wait = fault === "load" ? { retryAfterMs: 7_000 } : {};
  h.input(id, { type: "engine-failed", jobId, error: "HTTP 4xx: no", ...(fault ? { fault } : {}), ...wait });
}

describe("a local run's failure answers by whose fault it is", () => {
  it.each([
    ["input", "invalid", undefined],
    ["load", "unavailable", 7_000],
    ["engine", "engine", undefined],
    [undefined, "engine", undefined],
  ] as const)("fault %s: the reply's code is %s", (fault, code, retryAfterMs) => {
    const h = new Harness(["A"]);
    h.client("A", "r", prompt(1, 1));
    failRun(h, "A", fault);
    const replies = h.repliesFor("r");
    expect(replies).toHaveLength(1);
    expect(replies[0]?.outcome).toEqual({
      ok: false,
      error: "engine: HTTP 4xx: no",
      code,
      ...(retryAfterMs ? { retryAfterMs } : {}),
    });
  });
});

/** A forwards request `r` to B, whose run fails with `fault`; B's error reaches A. */
function forwardFails(fault: RunFault | undefined): Harness {
  const h = new Harness(["A", "B"], { suspectAfterPolls: 100 });
  h.warm("B", "wb", prompt(2, 1));
  h.gossip(3);
  expect(forwardsIn(h.client("A", "r", prompt(2, 2)))).toEqual(["B"]);
  h.deliver(isType("forward"));
  failRun(h, "B", fault);
  return h;
}

describe("a forward's failed run tells its origin whose fault", () => {
  it("the prompt refused at B: A falls back, and its own engine's refusal answers invalid", () => {
    const h = forwardFails("input");
    const err = h.mailbox.find(isType("error"))?.msg;
    expect(err).toMatchObject({ error: "engine: HTTP 4xx: no", retryable: true, fault: "input" });
    h.deliver(isType("error"));
    expect(h.repliesFor("r")).toHaveLength(0); // B's word alone ends nothing
    failRun(h, "A", "input");
    const replies = h.repliesFor("r");
    expect(replies).toHaveLength(1);
    expect(replies[0]?.outcome).toEqual({ ok: false, error: "engine: HTTP 4xx: no", code: "invalid" });
    expect(h.node("A").stats().peerErrors).toBe(0);
    // Every engine refused it: B told the truth, and is neither marked nor backed off.
    expect(h.node("A").peers()[0]?.trust).toMatchObject({ failures: 0, refusals: 0 });
  });

  // "input": a peer that calls every prompt refused fails no request.
  it.each(["input", "load", "engine", undefined] as const)(
    "fault %s: A falls back and runs it itself",
    (fault) => {
      const h = forwardFails(fault);
      const err = h.mailbox.find(isType("error"))?.msg;
      expect(err).toMatchObject({ retryable: true, ...(fault ? { fault } : {}) });
      h.deliver(isType("error"));
      h.finishRuns("A");
      const replies = h.repliesFor("r");
      expect(replies).toHaveLength(1);
      expect(replies[0]?.outcome.ok).toBe(true);
      expect(replies[0]?.record.fallbacks).toBe(1);
      // The peer's load, or its word against a prompt served here after all (it lied, or its engine
      // cannot run it), is a back-off, not a failure of the peer.
      const backOff = fault === "load" || fault === "input";
      expect(h.node("A").stats().peerErrors).toBe(backOff ? 0 : 1);
      expect(h.node("A").peers()[0]?.trust).toMatchObject({ refusals: backOff ? 1 : 0 });
    },
  );
});
