/** Peer trust (trust.ts): the circuit breaker's states, probation, and what counts against a peer. */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { isLoadRefusal } from "../../src/core/node/load-refusal.js";
import { trustConfig as config, newTrust as fresh } from "./trust-fixture.js";

describe("trust: the circuit breaker", () => {
  it("opens after `failures` failures in the window, and only for that peer", () => {
    const t = fresh();
    t.failed("b", "x", 0);
    t.failed("b", "x", 1);
    expect(t.view("b")?.state).toBe("closed");
    expect(t.routable("b", 2)).toBe(true);
    t.failed("b", "x", 2);
    expect(t.view("b")?.state).toBe("open");
    expect(t.routable("b", 3)).toBe(false);
    expect(t.routable("c", 3)).toBe(true);
    expect(t.view("b")?.score).toBeLessThan(0.5);
    expect(t.view("c")?.score).toBe(1);
  });

  it("forgets failures older than the window when answers came between them", () => {
    const t = fresh();
    t.failed("b", "x", 0);
    t.failed("b", "x", 1);
    t.answered("b", "x");
    t.failed("b", "x", 60_001);
    expect(t.view("b")?.state).toBe("closed");
  });

  it("opens after `failures` failures in a row, however far apart (a peer that never answers)", () => {
    const t = fresh();
    t.failed("b", "x", 0);
    t.failed("b", "x", 100_000);
    expect(t.view("b")?.state).toBe("closed");
    t.failed("b", "x", 200_000);
    expect(t.view("b")?.state).toBe("open");
  });

  it("answers late (`answeredLate`) fail in a row, however far apart; one in time between resets it", () => {
    const t = fresh();
    for (const [i, at] of [0, 100_000].entries()) {
      t.sent("b", `l${i}`, at);
      t.answeredLate("b", `l${i}`, at);
    }
    expect(t.view("b")).toMatchObject({ state: "closed", failures: 2 });
    t.sent("b", "ok", 150_000);
    t.answered("b", "ok");
    t.sent("b", "l2", 200_000);
    t.answeredLate("b", "l2", 200_000);
    expect(t.view("b")?.state).toBe("closed");
    for (const at of [300_000, 400_000]) {
      t.sent("b", `${at}`, at);
      t.answeredLate("b", `${at}`, at);
    }
    expect(t.view("b")).toMatchObject({ state: "open", failures: 5, opened: 1 });
  });

  it("an answer late is progress (probation ends) and ends the attempt; a late probe reopens", () => {
    const t = fresh();
    for (const k of ["1", "2", "3"]) t.sent("b", k, 0);
    expect(t.mayHold("b")).toBe(false);
    t.answeredLate("b", "1", 0);
    expect(t.mayHold("b")).toBe(true);
    t.answeredLate("b", "2", 1);
    t.answeredLate("b", "3", 2);
    expect(t.view("b")?.state).toBe("open");
    t.sent("b", "probe", 10_002); // opened at 2
    expect(t.view("b")?.state).toBe("half-open");
    t.answeredLate("b", "probe", 11_000);
    expect(t.view("b")?.state).toBe("open");
    expect(t.routable("b", 11_000 + 19_999)).toBe(false);
    expect(t.routable("b", 11_000 + 20_000)).toBe(true);
  });

  it("half-opens after openMs for one probe: success closes, failure reopens for twice as long", () => {
    const t = fresh();
    for (let i = 0; i < 3; i++) t.failed("b", "x", 0);
    expect(t.routable("b", 9_999)).toBe(false);
    expect(t.routable("b", 10_000)).toBe(true);
    t.sent("b", "x", 10_000);
    expect(t.view("b")?.state).toBe("half-open");
    // One probe at a time.
    expect(t.routable("b", 10_001)).toBe(false);
    t.failed("b", "x", 11_000);
    expect(t.view("b")?.state).toBe("open");
    expect(t.routable("b", 11_000 + 19_999)).toBe(false);
    expect(t.routable("b", 11_000 + 20_000)).toBe(true);
    t.sent("b", "x", 31_000);
    t.answered("b", "x");
    expect(t.view("b")?.state).toBe("closed");
    expect(t.view("b")?.opened).toBe(2);
    // Closed again, with a clean slate: one failure does not reopen it.
    t.failed("b", "x", 32_000);
    expect(t.view("b")?.state).toBe("closed");
  });

  it("caps the open period at maxOpenMs", () => {
    const t = fresh();
    for (let i = 0; i < 3; i++) t.failed("b", "x", 0);
    let at = 0;
    let until = 10_000;
    for (let k = 0; k < 6; k++) {
      at = until;
      t.sent("b", "x", at);
      t.failed("b", "x", at);
      const period = Math.min(40_000, 10_000 * 2 ** (k + 1));
      until = at + period;
      expect(t.routable("b", until - 1)).toBe(false);
      expect(t.routable("b", until)).toBe(true);
    }
  });

  it("a probe that ends without an outcome frees the half-open slot", () => {
    const t = fresh();
    for (let i = 0; i < 3; i++) t.failed("b", "x", 0);
    t.sent("b", "x", 10_000);
    expect(t.routable("b", 10_000)).toBe(false);
    t.ended("b", "x");
    expect(t.routable("b", 10_000)).toBe(true);
  });

  it("a refusal for load is no mark: a back-off that doubles, cleared by an answer", () => {
    const t = fresh();
    for (let i = 0; i < 10; i++) t.refused("b", 0);
    expect(t.view("b")).toMatchObject({ state: "closed", score: 1, failures: 0, refusals: 10 });
    expect(t.routable("b", 1_000)).toBe(false);
    t.answered("b", "x");
    t.refused("b", 100_000);
    expect(t.routable("b", 100_249)).toBe(false);
    expect(t.routable("b", 100_250)).toBe(true);
  });

  it("disabled: every peer stays routable whatever happens", () => {
    const t = fresh({ enabled: false });
    for (let i = 0; i < 10; i++) t.failed("b", "x", i);
    expect(t.routable("b", 11)).toBe(true);
  });

  it("matches a naive model: open exactly when `failures` fall within the window, or in a row", () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ gap: fc.integer({ min: 0, max: 30_000 }), fail: fc.boolean() }), {
          maxLength: 60,
        }),
        (steps) => {
          // Closed-state behaviour only (no probes): a success never closes a closed breaker's record.
          const t = fresh({ openMs: 1e9, maxOpenMs: 1e9 });
          const fails: number[] = [];
          let now = 0;
          let opened = false;
          let inRow = 0;
          for (const s of steps) {
            now += s.gap;
            if (s.fail) {
              t.failed("b", "x", now);
              fails.push(now);
              inRow++;
            } else {
              t.answered("b", "x");
              inRow = 0;
            }
            const recent = fails.filter((x) => x > now - config.windowMs).length;
            if (!opened && (recent >= 3 || inRow >= 3)) opened = true;
            expect(t.view("b")?.state).toBe(opened ? "open" : "closed");
          }
        },
      ),
    );
  });
});

describe("trust: progress (a peer holds at most `maxUnanswered` forwards it has not answered)", () => {
  it("on probation, may not be sent more than `maxUnanswered` attempts sent since its last answer", () => {
    const t = fresh();
    t.sent("b", "1", 0);
    t.sent("b", "2", 0);
    expect(t.mayHold("b")).toBe(true);
    t.sent("b", "3", 0);
    expect(t.mayHold("b")).toBe(false);
    expect(t.mayHold("c")).toBe(true);
    // Held to its window, it still ranks as a candidate (routable): only the next forward waits.
    expect(t.routable("b", 0)).toBe(true);
    // One of them ends (failed over, cancelled…): a slot opens, the breaker untouched.
    t.ended("b", "2");
    expect(t.mayHold("b")).toBe(true);
    t.sent("b", "4", 0);
    expect(t.mayHold("b")).toBe(false);
    // An answer, to any of them, shows progress: the ones sent before it no longer count.
    t.answered("b", "1");
    expect(t.mayHold("b")).toBe(true);
    expect(t.view("b")).toMatchObject({ state: "closed", failures: 0 });
    // And it ends the probation: a peer that answered is held to its deadlines, not to the window.
    for (const k of ["5", "6", "7", "8"]) t.sent("b", k, 0);
    expect(t.mayHold("b")).toBe(true);
  });

  it("a breaker that opens puts the peer back on probation until it answers again", () => {
    const t = fresh();
    t.sent("b", "1", 0);
    t.answered("b", "1");
    for (let i = 0; i < 3; i++) t.failed("b", `f${i}`, 0);
    // Half-open: one probe; answered, it closes, and the peer has answered since it opened.
    t.sent("b", "probe", 10_000);
    t.answered("b", "probe");
    for (const k of ["2", "3", "4", "5"]) t.sent("b", k, 10_000);
    expect(t.mayHold("b")).toBe(true);
    for (let i = 0; i < 3; i++) t.failed("b", `g${i}`, 10_000);
    expect(t.view("b")?.state).toBe("open");
    // A result for an old attempt while open is progress, but no proof: still on probation.
    t.progressed("b");
    t.sent("b", "probe2", 30_000);
    t.failed("b", "probe2", 30_000);
    t.ended("b", "probe2");
    for (const k of ["6", "7", "8"]) t.sent("b", k, 30_000 + 40_000);
    expect(t.mayHold("b")).toBe(false);
  });

  it("a failed attempt still counts until an answer: 3 failures, however spread, open the breaker first", () => {
    const t = fresh();
    t.sent("b", "1", 0);
    t.failed("b", "1", 0);
    t.ended("b", "1");
    t.sent("b", "2", 100_000);
    t.sent("b", "3", 100_000);
    expect(t.mayHold("b")).toBe(false);
    // A neutral end (cancelled, unreachable) frees its slot; a failure does not.
    t.ended("b", "3");
    expect(t.mayHold("b")).toBe(true);
    t.sent("b", "4", 100_000);
    for (const k of ["2", "4"]) {
      t.failed("b", k, 200_000);
      t.ended("b", k);
    }
    expect(t.view("b")).toMatchObject({ state: "open", failures: 3 });
    // The breaker holds it back now; past its period one probe may go.
    expect(t.routable("b", 200_000 + 10_000)).toBe(true);
    expect(t.mayHold("b")).toBe(true);
  });

  it("a late answer (to an attempt we moved on from) is progress too", () => {
    const t = fresh();
    for (const k of ["1", "2", "3"]) t.sent("b", k, 0);
    expect(t.mayHold("b")).toBe(false);
    t.progressed("b");
    expect(t.mayHold("b")).toBe(true);
  });

  it("0 is no bound; disabled trust sends whatever is unanswered", () => {
    for (const c of [{ maxUnanswered: 0 }, { enabled: false }]) {
      const t = fresh(c);
      for (let i = 0; i < 50; i++) t.sent("b", `${i}`, 0);
      expect(t.mayHold("b")).toBe(true);
    }
  });

  it("while half-open, only the probe's failure reopens: an older attempt's says nothing new", () => {
    const t = fresh();
    t.sent("b", "old", 0);
    for (let i = 0; i < 3; i++) t.failed("b", `f${i}`, 0);
    expect(t.view("b")?.state).toBe("open");
    t.sent("b", "probe", 10_000);
    expect(t.view("b")?.state).toBe("half-open");
    t.failed("b", "old", 10_500);
    t.ended("b", "old");
    expect(t.view("b")?.state).toBe("half-open");
    expect(t.routable("b", 10_500)).toBe(false); // the probe is still out
    t.answered("b", "probe");
    expect(t.view("b")?.state).toBe("closed");
  });

  it("matches a naive model: unanswered = attempts sent after the last answer, open or failed", () => {
    let blockedRuns = 0;
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            { arbitrary: fc.record({ op: fc.constant("send" as const) }), weight: 6 },
            {
              arbitrary: fc.record({
                op: fc.constantFrom("end" as const, "answer" as const, "fail" as const),
                pick: fc.nat(),
              }),
              weight: 2,
            },
            { arbitrary: fc.record({ op: fc.constant("late" as const) }), weight: 1 },
          ),
          { maxLength: 80 },
        ),
        (ops) => {
          // No breaker here (it would take over from the window): failures never open it.
          const t = fresh({ maxUnanswered: 4, failures: 1000 });
          // The model: open attempts with the answer count when each was sent; failed ones since.
          const open = new Map<string, number>();
          let failedSince = 0;
          let answers = 0;
          let n = 0;
          let blocked = false;
          for (const o of ops) {
            const keys = [...open.keys()];
            if (o.op === "send") {
              const k = `a${n++}`;
              t.sent("b", k, 0);
              open.set(k, answers);
            } else if (o.op === "late") {
              t.progressed("b");
              answers++;
              failedSince = 0;
            } else if (keys.length > 0) {
              const k = keys[o.pick % keys.length] as string;
              if (o.op === "answer") {
                t.answered("b", k);
                answers++;
                failedSince = 0;
              } else {
                // A failure is noted, then the attempt ends (as the origin does).
                if (o.op === "fail") {
                  t.failed("b", k, 0);
                  if (open.get(k) === answers) failedSince++;
                }
                t.ended("b", k);
              }
              open.delete(k);
            }
            const unanswered = [...open.values()].filter((a) => a === answers).length + failedSince;
            // On probation until its first answer (the breaker never opens here: no failures).
            expect(t.mayHold("b")).toBe(answers > 0 || unanswered < 4);
            blocked ||= !t.mayHold("b");
          }
          if (blocked) blockedRuns++;
        },
      ),
    );
    // The generator reaches the bound, so the window is exercised, not only the counting.
    expect(blockedRuns).toBeGreaterThan(0);
  });
});

describe("trust: what is a refusal for load", () => {
  it("overload, deadlines, busy, 429 and push-back are load; a 503 or an engine failure is not", () => {
    expect(isLoadRefusal("overloaded")).toBe(true);
    expect(isLoadRefusal("deadline: expected to start in 900 ms, origin waits 100 ms")).toBe(true);
    expect(isLoadRefusal("peer b refused forward: HTTP 429 too many requests")).toBe(true);
    expect(isLoadRefusal("shutting down")).toBe(true);
    expect(isLoadRefusal("refused: HTTP 503 service unavailable")).toBe(false);
    expect(isLoadRefusal("engine: out of memory")).toBe(false);
  });
});
