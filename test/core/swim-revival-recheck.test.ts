/**
 * The revival path of admissions.ts `verified` (a tombstone's check answered): a member back from the
 * dead is admitted once its check passes, a forged revival of a member still dead is kept out however
 * often it is told, and a revival passed with no word (a hello not settled yet) is checked once more
 * after `recheckAfterChangeMs` (`recheckDue`), then held at the member's own word.
 */
import { describe, expect, test } from "vitest";
import { resolveSwimConfig } from "../../src/core/node/swim/config.js";
import type { SwimEffect } from "../../src/core/node/swim/types.js";
import { gossipNode, harness } from "./swim-harness.js";

const C = resolveSwimConfig({});
const RECHECK_MS = C.recheckAfterChangeMs;
/** b's restart: its boot-time incarnation. */
const LIFE = 5_000;
/** Forged: far above b's own, yet within what a's clock believes. */
const FORGED = 500_000;

/** a holds b (at 100) and c; c's news kills b at 100, and the verifications so far are drained. */
function deadB() {
  const h = harness();
  h.admit("b", 100);
  h.admit("c", 0);
  h.gossip("c", [{ id: "b", status: "dead", incarnation: 100, from: "c" }]);
  expect(h.swim.status("b")).toBe("dead");
  expect(h.swim.liveMembers()).toEqual(["c"]);
  h.verifies.length = 0;
  const effects: SwimEffect[] = [];
  const tick = (t: number) => {
    h.at(t);
    effects.push(...h.run(h.swim.handle({ type: "timer", timer: { kind: "swim-gossip" } })));
  };
  const verified = (ok: boolean, own?: number) => effects.push(...h.verified("b", ok, own));
  return { h, tick, verified, effects };
}

describe("(a) a dead member back at a higher incarnation, its check passed", () => {
  test("is alive again at its own word, said up and spread; no re-check asked", () => {
    const { h, tick, verified, effects } = deadB();
    h.at(1_000);
    h.msg("b", { type: "ping", seq: 1, updates: [{ id: "b", status: "alive", incarnation: LIFE }] });
    expect(h.verifies).toEqual(["b"]);
    expect(h.swim.status("b")).toBe("dead");
    verified(true, LIFE);
    expect(h.swim.status("b")).toBe("alive");
    expect(h.incarnationOf("b")).toBe(LIFE);
    expect(h.swim.liveMembers()).toEqual(expect.arrayContaining(["b", "c"]));
    expect(effects).toContainEqual({ type: "member-up", id: "b" });
    expect(h.saysOf("b")).toEqual({ id: "b", status: "alive", incarnation: LIFE });
    // Its word was read: nothing left to re-check, however long we wait.
    for (let k = 1; k < 5; k++) tick(1_000 + k * RECHECK_MS);
    expect(h.verifies).toEqual(["b"]);
    expect(h.swim.status("b")).toBe("alive");
  });

  test("through the node: its liveness (what routing and estimates read) is live again", () => {
    const { node, gossip } = gossipNode();
    for (const id of ["b", "c"]) {
      gossip("x", [{ id, status: "alive", incarnation: 100 }]);
      node.handle({ type: "member-verified", id, ok: true, incarnation: 100 });
    }
    expect(node.livenessOf("b")).toBe("live");
    gossip("c", [{ id: "b", status: "dead", incarnation: 100, from: "c" }]);
    expect(node.livenessOf("b")).toBe("down");
    gossip("b", [{ id: "b", status: "alive", incarnation: LIFE }]);
    expect(node.livenessOf("b")).toBe("down");
    node.handle({ type: "member-verified", id: "b", ok: true, incarnation: LIFE });
    expect(node.livenessOf("b")).toBe("live");
    expect(node.peers().find((p) => p.id === "b")?.liveness).toBe("live");
    expect(node.meshMembers()?.find((m) => m.id === "b")).toEqual({
      id: "b",
      status: "alive",
      incarnation: LIFE,
    });
  });
});

describe("(b) a forged revival: a relay claims a dead member alive while it stays dead", () => {
  test("its check fails: kept out, and the same claim told again never lets it in", () => {
    const { h, tick, verified, effects } = deadB();
    h.at(1_000);
    h.gossip("c", [{ id: "b", status: "alive", incarnation: FORGED }]);
    expect(h.verifies).toEqual(["b"]);
    verified(false);
    expect(h.swim.status("b")).toBe("dead");
    expect(h.swim.liveMembers()).toEqual(["c"]);
    expect(h.swim.refusedMembers(1_000)).toEqual([expect.objectContaining({ id: "b" })]);
    // Within its backoff the copies ask nothing; gossip ticks past the re-check interval neither.
    h.gossip("c", [{ id: "b", status: "alive", incarnation: FORGED }]);
    for (let k = 1; k < 4; k++) tick(1_000 + k * RECHECK_MS);
    expect(h.verifies).toEqual(["b"]);
    // Past its backoff a copy asks again; failing again, it is still out.
    h.at(1_000 + C.recheckFirstMs + 1);
    h.gossip("c", [{ id: "b", status: "alive", incarnation: FORGED }]);
    expect(h.verifies).toEqual(["b", "b"]);
    verified(false);
    expect(h.swim.status("b")).toBe("dead");
    expect(h.incarnationOf("b")).toBe(100);
    expect(effects.filter((e) => e.type === "member-up")).toEqual([]);
  });

  test("b really restarted below the claim: admitted at its own word, the claim not spread", () => {
    const { h, verified } = deadB();
    h.at(1_000);
    h.gossip("c", [{ id: "b", status: "alive", incarnation: FORGED }]);
    verified(true, LIFE);
    expect(h.swim.status("b")).toBe("alive");
    expect(h.incarnationOf("b")).toBe(LIFE);
    expect(h.saysOf("b")).toEqual({ id: "b", status: "alive", incarnation: LIFE });
  });

  test("its check passes at the tombstone's own word: still dead, counted, until b itself refutes", () => {
    const { h, verified } = deadB();
    h.at(1_000);
    h.gossip("c", [{ id: "b", status: "alive", incarnation: FORGED }]);
    const before = h.swim.stats.implausibleIncarnations;
    // b's hello says 100, the life c's death named: the claim is a forgery, and dead outranks alive.
    verified(true, 100);
    expect(h.swim.status("b")).toBe("dead");
    expect(h.incarnationOf("b")).toBe(100);
    expect(h.swim.stats.implausibleIncarnations).toBe(before + 1);
    // b's own refutation (one more) is checked and admitted at its word.
    h.gossip("b", [{ id: "b", status: "alive", incarnation: 101 }]);
    expect(h.verifies).toEqual(["b", "b"]);
    verified(true, 101);
    expect(h.swim.status("b")).toBe("alive");
    expect(h.incarnationOf("b")).toBe(101);
  });
});

describe("(c) a revival whose check read no word (b's hello not settled yet)", () => {
  /** b restarted (life LIFE) and c forges it alive at FORGED; the check passes with no word at 1,000. */
  function unsettled(claim: number) {
    const r = deadB();
    r.h.at(1_000);
    r.h.gossip("b", [{ id: "b", status: "alive", incarnation: LIFE }]);
    r.h.gossip("c", [{ id: "b", status: "alive", incarnation: claim }]);
    expect(r.h.verifies).toEqual(["b"]);
    r.verified(true);
    expect(r.h.swim.status("b")).toBe("alive");
    expect(r.h.incarnationOf("b")).toBe(claim);
    r.h.verifies.length = 0;
    return r;
  }

  test("is checked once more after recheckAfterChangeMs; b's word then takes the forgery down", () => {
    const { h, tick, verified } = unsettled(FORGED);
    tick(1_000 + RECHECK_MS - 1);
    expect(h.verifies).toEqual([]);
    tick(1_000 + RECHECK_MS);
    expect(h.verifies).toEqual(["b"]);
    const before = h.swim.stats.implausibleIncarnations;
    verified(true, LIFE);
    expect(h.swim.status("b")).toBe("alive");
    expect(h.incarnationOf("b")).toBe(LIFE);
    expect(h.swim.stats.implausibleIncarnations).toBe(before + 1);
    expect(h.saysOf("b")).toEqual({ id: "b", status: "alive", incarnation: LIFE });
    // Settled: no further re-check.
    for (let k = 2; k < 5; k++) tick(1_000 + k * RECHECK_MS);
    expect(h.verifies).toEqual(["b"]);
  });

  test("a true revival re-checked the same way stays as it was, and is asked only once", () => {
    const { h, tick, verified } = unsettled(LIFE);
    tick(1_000 + RECHECK_MS);
    expect(h.verifies).toEqual(["b"]);
    const before = h.swim.stats.implausibleIncarnations;
    verified(true, LIFE);
    expect(h.incarnationOf("b")).toBe(LIFE);
    expect(h.swim.stats.implausibleIncarnations).toBe(before);
    for (let k = 2; k < 5; k++) tick(1_000 + k * RECHECK_MS);
    expect(h.verifies).toEqual(["b"]);
  });

  test("a re-check that fails puts it out again", () => {
    const { h, tick, verified } = unsettled(FORGED);
    tick(1_000 + RECHECK_MS);
    expect(h.verifies).toEqual(["b"]);
    verified(false);
    expect(h.swim.status("b")).toBe("dead");
    expect(h.swim.liveMembers()).toEqual(["c"]);
  });
});
