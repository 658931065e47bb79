/**
 * A check that passes holds the member at its own word (swim/own-word.ts, admissions.ts): a
 * credentialed sender's forged "alive far above" brings a check of the real member, which passes,
 * but the incarnation then held is what the member said in it (its hello), so the member's own later
 * refutations and restarts below the forged value are taken and checked as ever.
 */
import { describe, expect, test } from "vitest";
import { resolveSwimConfig } from "../../src/core/node/swim/config.js";
import { gossipNode, harness } from "./swim-harness.js";

/** Forged: far above b's own, yet within what a's clock (at 0) believes. */
const FORGED = 900_000;

/** `a` holding b live at 100 and c (the credentialed forger) at 0; c then claims b alive at FORGED. */
function forged() {
  const h = harness();
  h.admit("b", 100);
  h.admit("c", 0);
  h.verifies.length = 0;
  const c = resolveSwimConfig({});
  expect(FORGED).toBeLessThan(c.incarnationSkewMs + c.incarnationRefutations);
  h.gossip("c", [{ id: "b", status: "alive", incarnation: FORGED }]);
  expect(h.verifies).toEqual(["b"]);
  h.verifies.length = 0;
  return h;
}

describe("a forged new life of a real member, checked and passed", () => {
  test("holds the member at what its hello said, counted as implausible", () => {
    const h = forged();
    const before = h.swim.stats.implausibleIncarnations;
    h.verified("b", true, 100);
    expect(h.swim.status("b")).toBe("alive");
    expect(h.incarnationOf("b")).toBe(100);
    expect(h.swim.stats.implausibleIncarnations).toBe(before + 1);
  });

  test("the member's own refutation (one more) is then taken, unchecked", () => {
    const h = forged();
    h.verified("b", true, 100);
    h.gossip("b", [{ id: "b", status: "alive", incarnation: 101 }]);
    expect(h.incarnationOf("b")).toBe(101);
    expect(h.verifies).toEqual([]);
  });

  test("its real restart below the forged value is seen and checked", () => {
    const h = forged();
    h.verified("b", true, 100);
    h.at(5_000);
    h.gossip("b", [{ id: "b", status: "alive", incarnation: 5_000 }]);
    expect(h.verifies).toEqual(["b"]);
    // At or below the claim taken down: checked, not held meanwhile (a copy of the forgery reads alike).
    expect(h.incarnationOf("b")).toBe(100);
    h.verified("b", true, 5_000);
    expect(h.incarnationOf("b")).toBe(5_000);
    expect(h.saysOf("b")).toEqual({ id: "b", status: "alive", incarnation: 5_000 });
  });

  test("copies of the claim taken down are old news: not checked, held or spread again", () => {
    const h = forged();
    h.verified("b", true, 100);
    const before = h.swim.stats.implausibleIncarnations;
    h.at(1);
    h.gossip("c", [{ id: "b", status: "alive", incarnation: FORGED }]);
    h.gossip("c", [{ id: "b", status: "suspect", incarnation: FORGED - 5, from: "c" }]);
    expect(h.verifies).toEqual([]);
    expect(h.incarnationOf("b")).toBe(100);
    expect(h.swim.status("b")).toBe("alive");
    // What we still say of b is its own word, never the copies.
    expect(h.saysOf("b")).toEqual({ id: "b", status: "alive", incarnation: 100 });
    // Its own refutation (one more) is taken as ever.
    h.gossip("b", [{ id: "b", status: "alive", incarnation: 101 }]);
    expect(h.incarnationOf("b")).toBe(101);
    expect(h.swim.stats.implausibleIncarnations).toBe(before);
  });

  test("a copy after the re-check interval is checked once more, unheld; then quiet again", () => {
    const h = forged();
    h.verified("b", true, 100);
    const every = resolveSwimConfig({}).recheckAfterChangeMs;
    h.at(every);
    h.gossip("c", [{ id: "b", status: "alive", incarnation: FORGED }]);
    expect(h.verifies).toEqual(["b"]);
    expect(h.incarnationOf("b")).toBe(100);
    h.verified("b", true, 100);
    expect(h.incarnationOf("b")).toBe(100);
    h.verifies.length = 0;
    h.at(2 * every - 1);
    h.gossip("c", [{ id: "b", status: "alive", incarnation: FORGED }]);
    // Any new life of b within the interval waits for its next mention, a higher one too.
    h.gossip("c", [{ id: "b", status: "alive", incarnation: FORGED + 10 }]);
    expect(h.verifies).toEqual([]);
    expect(h.incarnationOf("b")).toBe(100);
  });

  test("a new life verified at or above the claim taken down ends the re-check interval", () => {
    const h = forged();
    h.verified("b", true, 100);
    h.gossip("c", [{ id: "b", status: "dead", incarnation: 100 }]);
    expect(h.swim.status("b")).toBe("dead");
    h.at(1);
    h.gossip("c", [{ id: "b", status: "alive", incarnation: FORGED + 10 }]);
    expect(h.verifies).toEqual(["b"]);
    h.verified("b", true, FORGED + 10);
    expect(h.incarnationOf("b")).toBe(FORGED + 10);
    h.verifies.length = 0;
    // Still within the interval of the claim taken down: its next life is checked at once.
    h.gossip("c", [{ id: "b", status: "alive", incarnation: FORGED + 20 }]);
    expect(h.verifies).toEqual(["b"]);
  });

  test("a life above the claim taken down, told after the interval, is checked and held as ever", () => {
    const h = forged();
    h.verified("b", true, 100);
    h.at(resolveSwimConfig({}).recheckAfterChangeMs);
    h.gossip("c", [{ id: "b", status: "alive", incarnation: FORGED + 10 }]);
    expect(h.verifies).toEqual(["b"]);
    expect(h.incarnationOf("b")).toBe(FORGED + 10);
    h.verified("b", true, FORGED + 10);
    expect(h.incarnationOf("b")).toBe(FORGED + 10);
  });

  test("we stop spreading the forged claim: our queued record of it is the member's own", () => {
    const h = forged();
    h.verified("b", true, 100);
    expect(h.saysOf("b")).toEqual({ id: "b", status: "alive", incarnation: 100 });
  });

  test("a newer life told while it was checked is checked again, not taken down on the old answer", () => {
    const h = forged();
    h.gossip("c", [{ id: "b", status: "alive", incarnation: FORGED + 10 }]);
    h.verified("b", true, 100);
    expect(h.verifies).toEqual(["b"]);
    expect(h.incarnationOf("b")).toBe(FORGED + 10);
    h.verified("b", true, 100);
    expect(h.incarnationOf("b")).toBe(100);
  });

  test("a hello at or above the claim changes nothing (its own news brings that)", () => {
    const h = forged();
    const before = h.swim.stats.implausibleIncarnations;
    h.verified("b", true, FORGED + 1);
    expect(h.incarnationOf("b")).toBe(FORGED);
    expect(h.swim.stats.implausibleIncarnations).toBe(before);
  });

  test("an answer without the member's word (an older node, the simulator) keeps the claim", () => {
    const h = forged();
    h.verified("b", true);
    expect(h.incarnationOf("b")).toBe(FORGED);
  });

  test("a word that is no safe non-negative integer is ignored", () => {
    for (const bad of [-1, 1.5, Number.NaN, Number.MAX_SAFE_INTEGER + 2]) {
      const h = forged();
      h.verified("b", true, bad);
      expect(h.incarnationOf("b"), String(bad)).toBe(FORGED);
    }
  });
});

describe("a forged high claim naming a candidate", () => {
  test("a new member is admitted at its own word", () => {
    const h = harness();
    h.admit("c", 0);
    h.gossip("c", [{ id: "d", status: "alive", incarnation: FORGED }]);
    h.verified("d", true, 10);
    expect(h.swim.status("d")).toBe("alive");
    expect(h.incarnationOf("d")).toBe(10);
    expect(h.swim.stats.implausibleIncarnations).toBe(1);
  });

  test("one that refuted (one more) between its hello and the answer is admitted at its refutation", () => {
    const h = harness();
    h.admit("c", 0);
    h.gossip("c", [{ id: "d", status: "alive", incarnation: 10 }]);
    h.gossip("c", [{ id: "d", status: "alive", incarnation: 11 }]);
    h.verified("d", true, 10);
    expect(h.incarnationOf("d")).toBe(11);
    expect(h.swim.stats.implausibleIncarnations).toBe(0);
  });

  test("one put out at a forged claim comes back at its own word once a re-check passes", () => {
    const h = forged();
    h.verified("b", false);
    expect(h.swim.status("b")).toBe("dead");
    h.at(resolveSwimConfig({}).recheckFirstMs + 1);
    h.verifies.length = 0;
    const asked = h.swim.handle({ type: "message", from: "b", msg: { type: "ping", seq: 1, updates: [] } });
    expect(asked.some((e) => e.type === "verify-member" && e.id === "b")).toBe(true);
    h.verified("b", true, 100);
    expect(h.swim.status("b")).toBe("alive");
    expect(h.incarnationOf("b")).toBe(100);
  });
});

describe("through the node (the runtime's `member-verified`)", () => {
  test("the member's own word reaches SWIM", () => {
    const { node, gossip } = gossipNode();
    gossip("x", [{ id: "c", status: "alive", incarnation: 0 }]);
    node.handle({ type: "member-verified", id: "c", ok: true, incarnation: 0 });
    gossip("c", [{ id: "d", status: "alive", incarnation: FORGED }]);
    node.handle({ type: "member-verified", id: "d", ok: true, incarnation: 10 });
    expect(node.meshMembers()?.find((m) => m.id === "d")).toEqual({
      id: "d",
      status: "alive",
      incarnation: 10,
    });
  });
});
