/**
 * A forged record of a member's new life told in the member's first moments after a restart, before a
 * member's list has answered its own: its hello says no incarnation yet (swim.ts `saidIncarnation`),
 * so a check then reads no word and the claim stands. At the top of what the others believe, the
 * member can never outbid it, so each node that checked it then must check again once the member has
 * settled (admissions.ts), or it holds the member out at the forged value for good.
 */
import { describe, expect, test } from "vitest";
import { resolveSwimConfig } from "../../src/core/node/swim/config.js";
import { harness } from "./swim-harness.js";
import { StormDriver } from "./swim-storm-driver.js";

const N = 12;
const SETTLE_MS = 20_000;
const RUN_MS = 60_000;
const X = "n5";
const FORGER = "n7";
const CONFIG = { incarnationRefuteMarginMs: 600_000 };
/** Forged: far above b's own, yet within what a's clock (at 0) believes. */
const FORGED = 500_000;
const RECHECK_MS = resolveSwimConfig({}).recheckAfterChangeMs;

/** X restarts at SETTLE_MS; `afterMs` later a forged alive record of X reaches `to`. */
function forgedAfterRestart(afterMs: number, to: string) {
  const c = resolveSwimConfig(CONFIG);
  const d = new StormDriver(N, CONFIG, 11);
  d.runUntil(SETTLE_MS);
  for (const [id, s] of d.swims) expect(s.liveMembers().length, id).toBe(N - 1);
  d.restart(X);
  d.runUntil(SETTLE_MS + afterMs);
  expect(d.swims.get(X)?.saidIncarnation, "X not settled yet").toBeUndefined();
  // Believed by the others, above what X may outbid for the whole run.
  const F = d.now + c.incarnationSkewMs + c.incarnationRefutations - 1_000;
  d.handle(to, {
    type: "message",
    from: FORGER,
    msg: { type: "gossip", updates: [{ id: X, status: "alive", incarnation: F }] },
  });
  d.runUntil(SETTLE_MS + RUN_MS);
  return { d, F, own: d.swims.get(X)?.currentIncarnation };
}

describe("a forged new life told 10–100 ms after the member restarted (its hello silent yet)", () => {
  for (const [afterMs, to] of [
    [10, "n2"],
    [40, "n2"],
    [70, "n9"],
    [100, "n2"],
  ] as const)
    test(`${afterMs} ms after, told to ${to}: no node holds the forgery, every one X's own`, () => {
      const r = forgedAfterRestart(afterMs, to);
      expect(r.own).toBeLessThan(r.F);
      for (const [id, s] of r.d.swims) {
        if (id === X) continue;
        expect(s.status(X), id).toBe("alive");
        expect(s.memberViews().find((m) => m.id === X)?.incarnation, id).toBe(r.own);
      }
    });
});

/** `a` holding b live at 100 and c at 0 (first admissions, no word); c then claims b alive at FORGED. */
function toldUnsettled() {
  const h = harness();
  h.admit("b", 100);
  h.admit("c", 0);
  const tick = (t: number) => {
    h.at(t);
    h.run(h.swim.handle({ type: "timer", timer: { kind: "swim-gossip" } }));
  };
  // A first admission is not re-checked: it has no earlier life whose records a forgery outbids.
  tick(RECHECK_MS * 3);
  expect(h.verifies).toEqual(["b", "c"]);
  h.verifies.length = 0;
  h.gossip("c", [{ id: "b", status: "alive", incarnation: FORGED }]);
  expect(h.verifies).toEqual(["b"]);
  h.verifies.length = 0;
  // b's hello says no incarnation yet: the claim stands, for now.
  h.verified("b", true);
  expect(h.incarnationOf("b")).toBe(FORGED);
  return { h, tick, at: RECHECK_MS * 3 };
}

describe("a check that read no word (admissions.ts `recheckDue`)", () => {
  test("is asked once more after recheckAfterChangeMs; the member's word then takes the claim down", () => {
    const { h, tick, at } = toldUnsettled();
    tick(at + RECHECK_MS - 1);
    expect(h.verifies).toEqual([]);
    tick(at + RECHECK_MS);
    expect(h.verifies).toEqual(["b"]);
    const before = h.swim.stats.implausibleIncarnations;
    h.verified("b", true, 102);
    expect(h.incarnationOf("b")).toBe(102);
    expect(h.swim.stats.implausibleIncarnations).toBe(before + 1);
    expect(h.saysOf("b")).toEqual({ id: "b", status: "alive", incarnation: 102 });
  });

  test("once only: a re-check that reads no word again (a node before own-word) is not repeated", () => {
    const { h, tick, at } = toldUnsettled();
    tick(at + RECHECK_MS);
    expect(h.verifies).toEqual(["b"]);
    h.verified("b", true);
    for (let k = 2; k < 10; k++) tick(at + k * RECHECK_MS);
    expect(h.verifies).toEqual(["b"]);
    expect(h.incarnationOf("b")).toBe(FORGED);
  });

  test("none when the life is no longer held there: a newer life was checked as one", () => {
    const { h, tick, at } = toldUnsettled();
    h.gossip("c", [{ id: "b", status: "alive", incarnation: FORGED + 10 }]);
    expect(h.verifies).toEqual(["b"]);
    h.verified("b", true, FORGED + 10);
    tick(at + RECHECK_MS);
    expect(h.verifies).toEqual(["b"]);
  });
});

describe("a re-check due is not lost to another check of the member", () => {
  /** b's claim G taken down to its word; then F (below G) passed with no word: held, re-check due. */
  function heldAfterTakeDown() {
    const { h, tick, at } = toldUnsettled();
    h.gossip("c", [{ id: "b", status: "alive", incarnation: FORGED + 100 }]);
    h.verified("b", true, 102);
    expect(h.incarnationOf("b")).toBe(102);
    const t = at + RECHECK_MS;
    h.at(t);
    h.gossip("c", [{ id: "b", status: "alive", incarnation: FORGED - 100 }]);
    h.verified("b", true);
    expect(h.incarnationOf("b")).toBe(FORGED - 100);
    h.verifies.length = 0;
    return { h, tick, t };
  }

  /**
   * A check of a higher, disowned claim starts when F's re-check falls due; `dueInFlight`: the gossip
   * tick comes while that check is in flight, else after its answer. Either way F is re-checked.
   */
  function otherCheckAtDue(dueInFlight: boolean) {
    const { h, tick, t } = heldAfterTakeDown();
    h.at(t + RECHECK_MS);
    h.gossip("c", [{ id: "b", status: "alive", incarnation: FORGED + 50 }]);
    if (dueInFlight) tick(t + RECHECK_MS);
    expect(h.verifies).toEqual(["b"]);
    h.verified("b", true, 102);
    tick(t + RECHECK_MS + 1);
    expect(h.verifies).toEqual(["b", "b"]);
    h.verified("b", true, 102);
    expect(h.incarnationOf("b")).toBe(102);
  }

  test("a check of a higher, disowned claim answered with the member's word first", () =>
    otherCheckAtDue(false));

  test("a check in flight when the re-check falls due, answered after it", () => otherCheckAtDue(true));
});
