/**
 * Answers late against their first deadline (trust.ts `answeredLate`), in the daemon's forward
 * settings: streamed output keeps a slow peer's forward open (forward-acks.ts `streamed`) and its
 * answer is the reply, but each answer past the deadline it had before any output counts against
 * the peer as that deadline did, so a peer streaming every answer late is demoted after a few and
 * routing goes elsewhere, while one late once is not.
 */
import { describe, expect, it } from "vitest";
import type { EngineResult } from "../../src/core/engine.js";
import { FAILURES, LATE_MS, latePair as pair, streamFromB, trustOfB } from "./late-stream.js";
import { type Harness, isType } from "./node-harness.js";

/**
 * A's client request `reqId` (topic 1) goes to B, which streams output every 100 ms (unless not
 * `streams`: as before output kept a forward) for `answerAfterMs` and then answers. Returns the result
 * B's engine produced, or undefined if A did not forward it.
 */
function askB(
  h: Harness,
  reqId: string,
  q: number,
  answerAfterMs: number,
  streams = true,
): EngineResult | undefined {
  const runs = h.members.get("B")?.runs;
  if (!streamFromB(h, reqId, q, answerAfterMs, streams)) return undefined;
  const result = [...(runs?.values() ?? [])][0]?.result;
  h.finishRuns("B");
  h.deliver(isType("result"));
  return result;
}

/** The reply A gave `reqId`: B's result, unchanged, served by B, and the only reply. */
function expectAnsweredByB(h: Harness, reqId: string, result: EngineResult | undefined): void {
  expect(result).toBeDefined();
  const replies = h.repliesFor(reqId);
  expect(replies).toHaveLength(1);
  expect(replies[0]?.outcome).toEqual({ ok: true, result });
  expect(replies[0]?.record.servedBy).toBe("B");
}

describe("answers late against their first deadline", () => {
  it("a peer streaming every answer late is demoted after a few; each answer is still the reply", () => {
    const h = pair();
    for (let i = 1; i <= FAILURES; i++) {
      expect(trustOfB(h)?.state).toBe("closed");
      const result = askB(h, `r${i}`, i, LATE_MS);
      expectAnsweredByB(h, `r${i}`, result);
      // Each a failure, and counted apart as one for slowness.
      expect(trustOfB(h)).toMatchObject({ failures: i, late: i });
    }
    // Kept open to the end: no fallback, no overdue give-up, yet the breaker opened. Each attempt was
    // re-sent meanwhile (answer recovery's probes): its first deadline runs from its first send.
    expect(h.node("A").stats()).toMatchObject({ fallbacks: 0, overdueAnswers: 0 });
    expect(h.node("A").stats().probes).toBeGreaterThanOrEqual(FAILURES);
    expect(trustOfB(h)).toMatchObject({ state: "open", opened: 1, failures: FAILURES });
    // Routing goes elsewhere: the next request for B's prefix runs here.
    expect(askB(h, "next", 99, 0)).toBeUndefined();
    h.finishRuns("A");
    expect(h.repliesFor("next")[0]?.record.servedBy).toBe("A");
  });

  it("a peer late once, then on time, is not demoted and keeps its traffic", () => {
    const h = pair();
    expectAnsweredByB(h, "late", askB(h, "late", 1, LATE_MS));
    expect(trustOfB(h)).toMatchObject({ state: "closed", failures: 1, late: 1 });
    for (let i = 2; i <= 2 + 2 * FAILURES; i++) expectAnsweredByB(h, `r${i}`, askB(h, `r${i}`, i, 50));
    expect(trustOfB(h)).toMatchObject({ state: "closed", failures: 1, late: 1, opened: 0 });
  });

  it("answers streamed within their first deadline are no mark, however many", () => {
    const h = pair();
    for (let i = 1; i <= 2 * FAILURES; i++) expectAnsweredByB(h, `r${i}`, askB(h, `r${i}`, i, 200));
    expect(trustOfB(h)).toMatchObject({ state: "closed", failures: 0, late: 0, opened: 0 });
  });

  it("an honest peer late now and then under load gets the marks it got before output kept it", () => {
    // Late, on time, late; a quiet minute (the failure window passes); late, on time twice.
    const schedule = [LATE_MS, 50, LATE_MS, -61_000, LATE_MS, 200, 50];
    const run = (streams: boolean) => {
      const h = pair();
      schedule.forEach((ms, i) => {
        if (ms < 0) h.advanceLive(-ms, 100);
        else expect(askB(h, `r${i}`, i, ms, streams)).toBeDefined();
      });
      return h;
    };
    const before = run(false);
    const now = run(true);
    // Before, each late answer was given up at its deadline (a fallback, and a mark); now each is
    // the reply, and marked once: the same marks, the breaker as closed; only now are they counted
    // as late (an overdue give-up is a failure like an error's).
    expect(before.node("A").stats()).toMatchObject({ overdueAnswers: 3, fallbacks: 3 });
    expect(now.node("A").stats()).toMatchObject({ overdueAnswers: 0, fallbacks: 0 });
    expect(trustOfB(before)).toMatchObject({ state: "closed", failures: 3, late: 0, opened: 0 });
    expect(trustOfB(now)).toEqual({ ...trustOfB(before), late: 3 });
    for (const [i, ms] of schedule.entries())
      if (ms >= 0) expect(now.repliesFor(`r${i}`)[0]?.record.servedBy).toBe("B");
  });

  it("a client hanging up on a late stream marks the peer as its answer would; an early hang-up not", () => {
    const h = pair();
    const hangUpAfter = (reqId: string, q: number, ms: number) => {
      expect(streamFromB(h, reqId, q, ms)).toBe(true);
      h.input("A", { type: "client-gone", reqId });
      h.deliver();
      h.finishRuns("B");
      h.deliver();
    };
    hangUpAfter("early", 1, 200);
    expect(trustOfB(h)).toMatchObject({ state: "closed", failures: 0, late: 0 });
    hangUpAfter("late", 2, LATE_MS);
    expect(trustOfB(h)).toMatchObject({ state: "closed", failures: 1, late: 1 });
    expect(h.node("A").stats()).toMatchObject({ clientGoneForwarded: 2, fallbacks: 0 });
  });
});
