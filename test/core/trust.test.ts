/** Peer trust (trust.ts): the circuit breaker's states, and what counts against a peer. */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { isLoadRefusal, Trust, type TrustConfig } from "../../src/core/node/trust.js";

const config: TrustConfig = {
  enabled: true,
  failures: 3,
  windowMs: 60_000,
  openMs: 10_000,
  maxOpenMs: 40_000,
};
const fresh = (c: Partial<TrustConfig> = {}) => {
  const t = new Trust({ ...config, ...c });
  t.reset(["b", "c"]);
  return t;
};

describe("trust: the circuit breaker", () => {
  it("opens after `failures` failures in the window, and only for that peer", () => {
    const t = fresh();
    t.failed("b", 0);
    t.failed("b", 1);
    expect(t.view("b")?.state).toBe("closed");
    expect(t.routable("b", 2)).toBe(true);
    t.failed("b", 2);
    expect(t.view("b")?.state).toBe("open");
    expect(t.routable("b", 3)).toBe(false);
    expect(t.routable("c", 3)).toBe(true);
    expect(t.view("b")?.score).toBeLessThan(0.5);
    expect(t.view("c")?.score).toBe(1);
  });

  it("forgets failures older than the window when answers came between them", () => {
    const t = fresh();
    t.failed("b", 0);
    t.failed("b", 1);
    t.answered("b");
    t.failed("b", 60_001);
    expect(t.view("b")?.state).toBe("closed");
  });

  it("opens after `failures` failures in a row, however far apart (a peer that never answers)", () => {
    const t = fresh();
    t.failed("b", 0);
    t.failed("b", 100_000);
    expect(t.view("b")?.state).toBe("closed");
    t.failed("b", 200_000);
    expect(t.view("b")?.state).toBe("open");
  });

  it("half-opens after openMs for one probe: success closes, failure reopens for twice as long", () => {
    const t = fresh();
    for (let i = 0; i < 3; i++) t.failed("b", 0);
    expect(t.routable("b", 9_999)).toBe(false);
    expect(t.routable("b", 10_000)).toBe(true);
    t.sent("b", 10_000);
    expect(t.view("b")?.state).toBe("half-open");
    // One probe at a time.
    expect(t.routable("b", 10_001)).toBe(false);
    t.failed("b", 11_000);
    expect(t.view("b")?.state).toBe("open");
    expect(t.routable("b", 11_000 + 19_999)).toBe(false);
    expect(t.routable("b", 11_000 + 20_000)).toBe(true);
    t.sent("b", 31_000);
    t.answered("b");
    expect(t.view("b")?.state).toBe("closed");
    expect(t.view("b")?.opened).toBe(2);
    // Closed again, with a clean slate: one failure does not reopen it.
    t.failed("b", 32_000);
    expect(t.view("b")?.state).toBe("closed");
  });

  it("caps the open period at maxOpenMs", () => {
    const t = fresh();
    for (let i = 0; i < 3; i++) t.failed("b", 0);
    let at = 0;
    let until = 10_000;
    for (let k = 0; k < 6; k++) {
      at = until;
      t.sent("b", at);
      t.failed("b", at);
      const period = Math.min(40_000, 10_000 * 2 ** (k + 1));
      until = at + period;
      expect(t.routable("b", until - 1)).toBe(false);
      expect(t.routable("b", until)).toBe(true);
    }
  });

  it("a probe that ends without an outcome frees the half-open slot", () => {
    const t = fresh();
    for (let i = 0; i < 3; i++) t.failed("b", 0);
    t.sent("b", 10_000);
    expect(t.routable("b", 10_000)).toBe(false);
    t.released("b");
    expect(t.routable("b", 10_000)).toBe(true);
  });

  it("a refusal for load is no mark: a back-off that doubles, cleared by an answer", () => {
    const t = fresh();
    for (let i = 0; i < 10; i++) t.refused("b", 0);
    expect(t.view("b")).toMatchObject({ state: "closed", score: 1, failures: 0, refusals: 10 });
    expect(t.routable("b", 1_000)).toBe(false);
    t.answered("b");
    t.refused("b", 100_000);
    expect(t.routable("b", 100_249)).toBe(false);
    expect(t.routable("b", 100_250)).toBe(true);
  });

  it("disabled: every peer stays routable whatever happens", () => {
    const t = fresh({ enabled: false });
    for (let i = 0; i < 10; i++) t.failed("b", i);
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
              t.failed("b", now);
              fails.push(now);
              inRow++;
            } else {
              t.answered("b");
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

describe("trust: quarantine (a spot check caught a wrong answer)", () => {
  it("is never routable again, whatever it answers later", () => {
    const t = fresh();
    t.quarantine("b");
    expect(t.view("b")).toMatchObject({ state: "quarantined", score: 0 });
    t.answered("b");
    t.sent("b", 1e9);
    t.failed("b", 1e9);
    expect(t.view("b")?.state).toBe("quarantined");
    expect(t.routable("b", 1e12)).toBe(false);
    expect(t.routable("c", 0)).toBe(true);
  });
});
