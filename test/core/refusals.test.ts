/** Refusals that are asked again: the backoff (core/refusals.ts) and SWIM's re-check of a refused candidate. */
import { describe, expect, test } from "vitest";
import { MAX_INCARNATION } from "../../src/core/node/swim/codec.js";
import { bootIncarnation } from "../../src/core/node/swim/incarnation.js";
import { Swim } from "../../src/core/node/swim/swim.js";
import type { SwimEffect, SwimMessage } from "../../src/core/node/swim/types.js";
import {
  CLOCK_SKEW,
  CLOCK_SKEW_MAX_MS,
  DEFAULT_RECHECK,
  RECHECK_FIRST_MS,
  RECHECK_MAX_MS,
  Refusals,
  recheckDelayMs,
  timingFor,
} from "../../src/core/refusals.js";

const timing = { firstMs: 100, maxMs: 1_000, afterChangeMs: 10 };

describe("refusal backoff", () => {
  test("doubles per refusal in a row, from the first wait up to the ceiling", () => {
    expect([1, 2, 3, 4, 5, 6].map((n) => recheckDelayMs(timing, n))).toEqual([
      100, 200, 400, 800, 1000, 1000,
    ]);
    expect(recheckDelayMs(DEFAULT_RECHECK, 1)).toBe(RECHECK_FIRST_MS);
    expect(recheckDelayMs(DEFAULT_RECHECK, 1_000)).toBe(RECHECK_MAX_MS);
  });

  test("a re-check that got no answer postpones the next without growing the backoff", () => {
    const r = new Refusals<string>(timing);
    r.refuse("x", "wrong-cluster", 0);
    r.postpone("x", 250);
    expect(r.get("x")).toMatchObject({ recheckAt: 250, refusals: 1, refusedAt: 0 });
    expect(r.mayCheck("x", 249)).toBe(false);
    r.postpone("x", 200); // never earlier
    expect(r.get("x")?.recheckAt).toBe(250);
    r.postpone("y", 1_000); // not refused: nothing to postpone
    expect(r.has("y")).toBe(false);
  });

  test("a refused key may be checked only once its wait ran out, and a pass starts the backoff over", () => {
    const r = new Refusals<string>(timing);
    expect(r.mayCheck("x", 0)).toBe(true);
    expect(r.refuse("x", "wrong-cluster", 0)).toMatchObject({ recheckAt: 100, refusals: 1 });
    expect(r.mayCheck("x", 99)).toBe(false);
    expect(r.mayCheck("x", 100)).toBe(true);
    expect(r.refuse("x", "wrong-cluster", 100)).toMatchObject({ recheckAt: 300, refusals: 2 });
    expect(r.mayCheck("x", 299)).toBe(false);
    expect(r.nextRecheckAt()).toBe(300);
    r.forget("x");
    expect(r.mayCheck("x", 0)).toBe(true);
    expect(r.refuse("x", "wrong-model", 500)).toMatchObject({
      recheckAt: 600,
      refusals: 1,
      reason: "wrong-model",
    });
  });

  test("evidence of change (a higher mark) allows a check sooner, but not within afterChangeMs", () => {
    const r = new Refusals<string>(timing);
    r.refuse("x", "no", 0, 5);
    expect(r.mayCheck("x", 10, 5)).toBe(false); // the same mark is no evidence
    expect(r.mayCheck("x", 10)).toBe(false); // nor news without one
    expect(r.mayCheck("x", 10, 6)).toBe(true);
    // Refused again under the higher mark: only a still higher one is news.
    r.refuse("x", "no", 10, 6);
    expect(r.mayCheck("x", 30, 6)).toBe(false);
    expect(r.mayCheck("x", 30, 7)).toBe(true);
  });

  test("evidence heard too soon is kept: the next mention after the floor checks it", () => {
    const r = new Refusals<string>(timing);
    r.refuse("x", "no", 0, 5);
    expect(r.mayCheck("x", 5, 6)).toBe(false); // too soon after the refusal
    expect(r.mayCheck("x", 10)).toBe(true); // a mention without a mark (a ping) after it
    // The check that evidence led to refused again: it is spent, only newer news counts.
    r.refuse("x", "no", 10);
    expect(r.get("x")).toMatchObject({ mark: 6, heard: 6 });
    expect(r.mayCheck("x", 30)).toBe(false);
    expect(r.mayCheck("x", 30, 6)).toBe(false);
    expect(r.mayCheck("x", 30, 7)).toBe(true);
  });

  test("news heard while a re-check is due is kept too: a check it did not start still spends it", () => {
    const r = new Refusals<string>(timing);
    r.refuse("x", "no", 0, 5);
    // Due (its wait is over) when news of 9 comes, but that mention starts no check (a full queue).
    expect(r.mayCheck("x", 100, 9)).toBe(true);
    // A later mention without a mark (a ping) re-checks it, which refuses it again.
    expect(r.mayCheck("x", 110)).toBe(true);
    r.refuse("x", "no", 110);
    // 9 was heard before that check: no evidence of change any more.
    expect(r.get("x")).toMatchObject({ mark: 9, heard: 9 });
    expect(r.mayCheck("x", 130, 9)).toBe(false);
  });

  test("a clock-skew refusal's backoff stops doubling at CLOCK_SKEW_MAX_MS", () => {
    const t = { firstMs: 30_000, maxMs: 600_000, afterChangeMs: 2_000 };
    expect(timingFor(t, "wrong-cluster: x")).toBe(t);
    expect(timingFor(t, `${CLOCK_SKEW}: x`).maxMs).toBe(CLOCK_SKEW_MAX_MS);
    expect(timingFor({ ...t, maxMs: 60_000 }, CLOCK_SKEW).maxMs).toBe(60_000); // never above the ceiling
    const r = new Refusals<string>(t);
    const waits = [1, 2, 3, 4, 5].map((i) => {
      const x = r.refuse("x", `${CLOCK_SKEW}: this node's clock is 45 s behind`, i * 1_000_000);
      return x.recheckAt - x.refusedAt;
    });
    expect(waits).toEqual([30_000, 60_000, 120_000, 120_000, 120_000]);
    const y = [1, 2, 3, 4, 5].map((i) => r.refuse("y", "wrong-model: m", i * 1_000_000));
    expect(y.map((x) => x.recheckAt - x.refusedAt).at(-1)).toBe(480_000);
  });

  test("remembers at most `max` refusals, forgetting the oldest", () => {
    const r = new Refusals<string>(timing, 3);
    for (let i = 0; i < 10; i++) r.refuse(`k${i}`, "no", i);
    expect(r.size).toBe(3);
    expect(r.entries().map(([k]) => k)).toEqual(["k7", "k8", "k9"]);
    // A refusal again moves its key to the newest end.
    r.refuse("k7", "no", 20);
    r.refuse("k10", "no", 21);
    expect(r.entries().map(([k]) => k)).toEqual(["k9", "k7", "k10"]);
  });
});

/** One Swim on a hand-driven clock with member "b" admitted; collects its verify-member effects. */
function swimWithMember() {
  let now = 0;
  const swim = new Swim(
    "a",
    [],
    { now: () => now, random: () => 0.5 },
    {
      recheckFirstMs: 1_000,
      recheckMaxMs: 4_000,
      recheckAfterChangeMs: 100,
    },
  );
  const verifies: string[] = [];
  const run = (effects: SwimEffect[]) => {
    for (const e of effects) if (e.type === "verify-member") verifies.push(e.id);
  };
  const msg = (from: string, m: SwimMessage) => run(swim.handle({ type: "message", from, msg: m }));
  const relay = (id: string, incarnation: number) =>
    msg("b", { type: "gossip", updates: [{ id, status: "alive", incarnation }] });
  relay("b", 0);
  run(swim.handle({ type: "verified", id: "b", ok: true }));
  return {
    swim,
    verifies,
    relay,
    msg,
    verdict: (id: string, ok: boolean, reason?: string) =>
      run(swim.handle({ type: "verified", id, ok, ...(reason ? { reason } : {}) })),
    at: (t: number) => {
      now = t;
    },
  };
}

describe("SWIM re-checks a refused candidate", () => {
  test("when named after its backoff, through a fresh verify-member, and admits it once that passes", () => {
    const h = swimWithMember();
    h.relay("x", 0);
    expect(h.verifies).toEqual(["b", "x"]);
    h.verdict("x", false, "wrong-cluster: peer is in cluster 'other'");
    expect(h.swim.refusedMembers(0)).toEqual([
      {
        id: "x",
        reason: "wrong-cluster: peer is in cluster 'other'",
        refusals: 1,
        refusedForMs: 0,
        recheckInMs: 1_000,
      },
    ]);
    // Named again within the backoff (a relay, or x's own ping): not asked.
    h.at(999);
    h.relay("x", 0);
    h.msg("x", { type: "ping", seq: 1, updates: [] });
    expect(h.verifies).toEqual(["b", "x"]);
    // Past it: asked once more, even if named twice.
    h.at(1_000);
    h.msg("x", { type: "ping", seq: 2, updates: [] });
    h.relay("x", 0);
    expect(h.verifies).toEqual(["b", "x", "x"]);
    expect(h.swim.stats.rechecks).toBe(1);
    // Still wrong: refused again, the wait doubled.
    h.verdict("x", false, "wrong-cluster");
    expect(h.swim.refusedMembers(1_000)[0]).toMatchObject({ refusals: 2, recheckInMs: 2_000 });
    h.at(2_999);
    h.relay("x", 0);
    expect(h.verifies).toHaveLength(3);
    // Fixed: the next check passes and it is a member; the refusal is forgotten.
    h.at(3_000);
    h.relay("x", 0);
    expect(h.verifies).toHaveLength(4);
    h.verdict("x", true);
    expect(h.swim.status("x")).toBe("alive");
    expect(h.swim.refusedMembers(3_000)).toEqual([]);
  });

  test("at once (after the short floor) when gossip names it under a higher incarnation", () => {
    const h = swimWithMember();
    h.relay("x", 3);
    h.verdict("x", false, "protocol");
    h.at(100);
    h.relay("x", 3); // the incarnation it was refused under: no news
    expect(h.verifies).toEqual(["b", "x"]);
    h.relay("x", 4);
    expect(h.verifies).toEqual(["b", "x", "x"]);
    h.verdict("x", true);
    expect(h.swim.status("x")).toBe("alive");
  });

  test("a refused id's re-check never admits it without a yes, whatever relays say", () => {
    const h = swimWithMember();
    h.relay("x", 0);
    h.verdict("x", false);
    h.at(5_000);
    h.relay("x", 9);
    expect(h.verifies.at(-1)).toBe("x");
    // Relays keep saying it is alive: still only a candidate until our own check answers.
    for (let i = 10; i < 20; i++) h.relay("x", i);
    expect(h.swim.status("x")).toBeUndefined();
    expect(h.verifies.filter((v) => v === "x")).toHaveLength(2);
  });
});

describe("a restart outranks its previous life", () => {
  test("a node's first incarnation is its boot time in ms of the injected clock", () => {
    expect(bootIncarnation(0)).toBe(0);
    expect(bootIncarnation(1_234.9)).toBe(1_234);
    expect(bootIncarnation(-5)).toBe(0);
    expect(bootIncarnation(Number.MAX_VALUE)).toBe(MAX_INCARNATION);
    const life = (at: number) => new Swim("x", [], { now: () => at, random: () => 0.5 });
    expect(life(1_764_980_000_123).currentIncarnation).toBe(1_764_980_000_123);
    expect(life(0).currentIncarnation).toBe(0);
  });

  test("a refused node restarted fixed is re-checked on its new life's news, long before its backoff", () => {
    const h = swimWithMember();
    const first = new Swim("x", [], { now: () => 5_000, random: () => 0.5 });
    h.at(5_000);
    h.relay("x", first.currentIncarnation);
    h.verdict("x", false, "wrong-cluster");
    // Restarted 30 ms later (fixed): it announces the new life's incarnation once, within the
    // re-check floor (recheckAfterChangeMs), then only pings, which carry no incarnation.
    const second = new Swim("x", [], { now: () => 5_030, random: () => 0.5 });
    expect(second.currentIncarnation).toBeGreaterThan(first.currentIncarnation);
    h.at(5_030);
    const self = { id: "x", status: "alive" as const, incarnation: second.currentIncarnation };
    h.msg("x", { type: "sync", reply: true, members: [self] });
    expect(h.verifies).toEqual(["b", "x"]);
    h.at(5_100);
    h.msg("x", { type: "ping", seq: 1, updates: [] });
    expect(h.verifies).toEqual(["b", "x", "x"]); // at the floor, not the 1 s backoff
    expect(h.swim.stats.rechecks).toBe(1);
    h.verdict("x", true);
    expect(h.swim.status("x")).toBe("alive");
  });

  test("a member held dead comes back alive on its restarted life's news, once verified again", () => {
    const h = swimWithMember();
    h.relay("b", 0); // b was admitted at incarnation 0 (booted at t = 0)
    h.msg("b", { type: "gossip", updates: [{ id: "b", status: "dead", incarnation: 3, from: "b" }] });
    expect(h.swim.status("b")).toBe("dead");
    h.at(60_000);
    const again = new Swim("b", [], { now: () => 60_000, random: () => 0.5 });
    h.msg("b", {
      type: "gossip",
      updates: [{ id: "b", status: "alive", incarnation: again.currentIncarnation }],
    });
    // The restarted process may serve another model or cluster: checked as a first admission is.
    expect(h.swim.status("b")).toBe("dead");
    expect(h.verifies).toEqual(["b", "b"]);
    h.verdict("b", true);
    expect(h.swim.status("b")).toBe("alive");
  });
});
