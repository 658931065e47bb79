/**
 * Refutations against new lives (swim/self-news.ts, admissions.ts `newLife`): a member outbids only
 * its own suspicion by one, so a rise of one is never checked, whether the suspicion was heard here or
 * not; a process outbids a record of another life of itself by two, so its new life is checked.
 */
import { describe, expect, test } from "vitest";
import { Swim } from "../../src/core/node/swim/swim.js";
import type { MemberUpdate, SwimMessage } from "../../src/core/node/swim/types.js";
import { harness } from "./swim-harness.js";

/** One Swim booted at `bootAt`, its clock left there (swim-harness.ts). */
const booted = (self: string, bootAt: number) => harness(self, [], {}, bootAt);

/** Peer `a`, holding `b` live at `held` and `c` at 0, with no check asked yet. */
function holding(held: number) {
  const a = booted("a", 0);
  a.admit("b", held);
  a.admit("c", 0);
  a.verifies.length = 0;
  return a;
}

describe("a refutation of a suspicion this node never heard of", () => {
  test("alive n, then alive n + 1: taken with no check", () => {
    const a = holding(100);
    a.gossip("c", [{ id: "b", status: "alive", incarnation: 101 }]);
    expect(a.incarnationOf("b")).toBe(101);
    expect(a.verifies).toEqual([]);
  });

  test("alive n, then a suspicion at n + 1 (of the refuted life): no check either", () => {
    const a = holding(100);
    a.gossip("c", [{ id: "b", status: "suspect", incarnation: 101, from: "c" }]);
    expect(a.swim.status("b")).toBe("suspect");
    expect(a.verifies).toEqual([]);
  });

  test("a rise of two or more is still a new life, checked", () => {
    const a = holding(100);
    a.gossip("c", [{ id: "b", status: "alive", incarnation: 102 }]);
    expect(a.verifies).toEqual(["b"]);
  });
});

describe("a process hearing a record of another life of itself", () => {
  test("its own alive record echoed back is no cause to rise", () => {
    const b = booted("b", 5_000);
    b.admit("c", 0);
    b.gossip("c", [{ id: "b", status: "alive", incarnation: 5_000 }]);
    b.gossip("c", [{ id: "b", status: "alive", incarnation: 4_000 }]);
    expect(b.swim.currentIncarnation).toBe(5_000);
  });

  test("its own suspicion is refuted by one, as ever", () => {
    const b = booted("b", 5_000);
    b.admit("c", 0);
    b.gossip("c", [{ id: "b", status: "suspect", incarnation: 5_000, from: "c" }]);
    expect(b.swim.currentIncarnation).toBe(5_001);
    expect(b.swim.stats.refuted).toBe(1);
  });

  test("restarted with its clock set back, it outbids its old life's alive record by two; a peer checks it", () => {
    // The old life ran at 5,000; a peer holds it alive there.
    const a = holding(5_000);
    // b restarts with its clock behind (boot 3,000) and hears its old life's record from a member.
    const b = booted("b", 3_000);
    b.admit("c", 0);
    b.gossip("c", [{ id: "b", status: "alive", incarnation: 5_000 }]);
    expect(b.swim.currentIncarnation).toBe(5_002);
    // Another life's record, not a suspicion of this one: no refutation counted, no health lost.
    expect(b.swim.stats.refuted).toBe(0);
    const said = b.saysOf("b");
    expect(said).toEqual({ id: "b", status: "alive", incarnation: 5_002 });
    a.gossip("b", [said as MemberUpdate]);
    expect(a.verifies).toEqual(["b"]);
  });

  test("a suspicion of its old life above it is outbid by two as well", () => {
    const b = booted("b", 3_000);
    b.admit("c", 0);
    b.gossip("c", [{ id: "b", status: "suspect", incarnation: 5_000, from: "c" }]);
    expect(b.swim.currentIncarnation).toBe(5_002);
  });

  test("booted exactly one above its old life: peers that took that as a refutation see two more", () => {
    const a = holding(5_000);
    const b = booted("b", 5_001);
    b.admit("c", 0);
    // a hears the new life's boot record first: one above, so a refutation to it, unchecked.
    a.gossip("b", [{ id: "b", status: "alive", incarnation: 5_001 }]);
    expect(a.verifies).toEqual([]);
    // b hears its old life's record (below its boot, so not of this life) and outbids its own by two.
    b.gossip("c", [{ id: "b", status: "alive", incarnation: 5_000 }]);
    expect(b.swim.currentIncarnation).toBe(5_003);
    a.gossip("b", [b.saysOf("b") as MemberUpdate]);
    expect(a.verifies).toEqual(["b"]);
    // Once well above it, the old record changes nothing more.
    b.gossip("c", [{ id: "b", status: "alive", incarnation: 5_000 }]);
    expect(b.swim.currentIncarnation).toBe(5_003);
  });
});

/** A peer `a` holding `b` at `held`, its checks of `b` answered yes as they come. */
function peerHolding(held: number) {
  const a = booted("a", 0);
  a.admit("b", held);
  a.verifies.length = 0;
  const hear = (u: MemberUpdate) => {
    const before = a.verifies.length;
    a.gossip("b", [u]);
    if (a.verifies.length > before) a.swim.handle({ type: "verified", id: "b", ok: true });
  };
  return { ...a, hear };
}

describe("two live processes with one id (a copied config, a partitioned old process)", () => {
  test("outbid each other a bounded few times, then count it; a peer's checks stay bounded", () => {
    const p1 = booted("b", 3_000);
    const p2 = booted("b", 5_000);
    p1.admit("c", 0);
    p2.admit("c", 0);
    const a = peerHolding(5_000);
    const said = (p: typeof p1): MemberUpdate => ({
      id: "b",
      status: "alive",
      incarnation: p.swim.currentIncarnation,
    });
    const history: number[] = [];
    for (let round = 0; round < 50; round++) {
      p1.gossip("c", [said(p2)]);
      p2.gossip("c", [said(p1)]);
      a.hear(said(p1));
      a.hear(said(p2));
      history.push(p1.swim.currentIncarnation + p2.swim.currentIncarnation);
    }
    // Settled early: the last many rounds changed nothing.
    expect(new Set(history.slice(5)).size).toBe(1);
    // Each outbid its other life at most twice (self-news.ts MAX_OUTBIDS).
    expect(Math.max(p1.swim.currentIncarnation, p2.swim.currentIncarnation)).toBeLessThanOrEqual(5_000 + 8);
    expect(a.verifies.length).toBeLessThanOrEqual(4);
    // The operator is told: each counts the other's records it no longer outbids.
    expect(p1.swim.stats.duplicateId + p2.swim.stats.duplicateId).toBeGreaterThan(40);
    expect(p1.swim.stats.refuted + p2.swim.stats.refuted).toBe(0);
  });

  test("past its outbids, a suspicion of it is still answered, so it is not put out", () => {
    const p1 = booted("b", 3_000);
    p1.admit("c", 0);
    for (const inc of [5_000, 5_010, 5_020, 5_030])
      p1.gossip("c", [{ id: "b", status: "alive", incarnation: inc }]);
    const settled = p1.swim.currentIncarnation;
    expect(settled).toBe(5_012);
    expect(p1.swim.stats.duplicateId).toBe(2);
    // A suspicion at its own incarnation: refuted by one.
    p1.gossip("c", [{ id: "b", status: "suspect", incarnation: settled, from: "c" }]);
    expect(p1.swim.currentIncarnation).toBe(settled + 1);
    // One above it (the other process's): outbid by two, a suspicion being no alive record.
    p1.gossip("c", [{ id: "b", status: "dead", incarnation: 5_030, from: "c" }]);
    expect(p1.swim.currentIncarnation).toBe(5_032);
  });
});

describe("a restart with its clock set back, its old life's records at two incarnations in flight", () => {
  // The old life ran at 5,000 and refuted once (5,001); peers hold either; the new life boots at 3,000.
  test.each([{ order: [5_000, 5_001] }, { order: [5_001, 5_000] }])(
    "heard in the order $order: it ends two above both, and every peer checks it",
    ({ order }) => {
      const b = booted("b", 3_000);
      b.admit("c", 0);
      const peers = [peerHolding(5_000), peerHolding(5_001)];
      for (const inc of order) b.gossip("c", [{ id: "b", status: "alive", incarnation: inc }]);
      const now = b.swim.currentIncarnation;
      expect(now).toBeGreaterThanOrEqual(5_001 + 2);
      // Its news reaches the peers with every incarnation it said on the way (the first in flight too).
      const said = [now - 2, now].filter((i) => i > 5_001);
      for (const p of peers) for (const inc of said) p.hear({ id: "b", status: "alive", incarnation: inc });
      for (const p of peers) {
        expect(p.incarnationOf("b")).toBe(now);
        expect(p.verifies.length).toBeGreaterThan(0);
      }
      expect(b.swim.stats.duplicateId).toBe(0);
    },
  );

  test("in ascending order, a peer that took the first outbid as a refutation is checked at the second", () => {
    const b = booted("b", 3_000);
    b.admit("c", 0);
    const p = peerHolding(5_001);
    b.gossip("c", [{ id: "b", status: "alive", incarnation: 5_000 }]);
    expect(b.swim.currentIncarnation).toBe(5_002);
    p.hear({ id: "b", status: "alive", incarnation: 5_002 });
    expect(p.verifies).toEqual([]); // one above what it held: a refutation to it
    b.gossip("c", [{ id: "b", status: "alive", incarnation: 5_001 }]);
    expect(b.swim.currentIncarnation).toBe(5_004);
    p.hear({ id: "b", status: "alive", incarnation: 5_004 });
    expect(p.verifies).toEqual(["b"]);
  });
});

describe("a restart booted one above its old life's incarnation", () => {
  test("its seed's answer to its join names the old record; it outbids it by two, no refutation counted", () => {
    const seed = booted("s", 0);
    seed.admit("b", 5_000);
    const b = new Swim("b", ["s"], { now: () => 5_001, random: () => 0.5 });
    const ask = b.start().find((e) => e.type === "send" && e.msg.type === "sync");
    expect(ask?.type === "send" && ask.msg).toMatchObject({ type: "sync", reply: true });
    const answer = seed.swim
      .handle({ type: "message", from: "b", msg: (ask as { msg: SwimMessage }).msg })
      .find((e) => e.type === "send" && e.msg.type === "sync");
    const msg = (answer as { msg: SwimMessage }).msg;
    expect("members" in msg && msg.members).toContainEqual({ id: "b", status: "alive", incarnation: 5_000 });
    // b has not verified its seed yet: the record is taken only as its previous life's.
    b.handle({ type: "message", from: "s", msg });
    expect(b.currentIncarnation).toBe(5_003);
    expect(b.stats.refuted).toBe(0);
  });

  test("an unverified sender's suspicion of us is never answered, nor a record not just below us", () => {
    const b = new Swim("b", [], { now: () => 5_001, random: () => 0.5 });
    const hear = (u: MemberUpdate) =>
      b.handle({ type: "message", from: "x", msg: { type: "gossip", updates: [u] } });
    hear({ id: "b", status: "suspect", incarnation: 5_001, from: "x" });
    hear({ id: "b", status: "alive", incarnation: 6_000 });
    hear({ id: "b", status: "alive", incarnation: 4_000 });
    expect(b.currentIncarnation).toBe(5_001);
  });
});
