/** SWIM's membership rules (swim/swim.ts): verification, suspicion, confirmations, probes, bounds. */
import { describe, expect, test } from "vitest";
import type { SwimMessage } from "../../src/core/node/swim/types.js";
import { harness } from "./swim-harness.js";

describe("swim membership rules", () => {
  test("a member heard of through a relay joins only after our own verification says yes", () => {
    const h = harness();
    h.admit("b");
    expect(h.swim.liveMembers()).toEqual(["b"]);
    // A verified member relays news of "evil": a candidate, verified by us, refused.
    h.msg("b", { type: "gossip", updates: [{ id: "evil", status: "alive", incarnation: 9 }] });
    expect(h.verifies).toContain("evil");
    expect(h.swim.liveMembers()).toEqual(["b"]);
    h.run(h.swim.handle({ type: "verified", id: "evil", ok: false }));
    expect(h.swim.liveMembers()).toEqual(["b"]);
    expect(h.swim.stats.refusedMembers).toBe(1);
    // Once refused, further relays do not make us ask again at once (only after its backoff).
    const asked = h.verifies.length;
    h.msg("b", { type: "gossip", updates: [{ id: "evil", status: "alive", incarnation: 10 }] });
    expect(h.verifies.length).toBe(asked);
    // A verification nobody asked for is ignored.
    h.run(h.swim.handle({ type: "verified", id: "ghost", ok: true }));
    expect(h.swim.status("ghost")).toBeUndefined();
  });

  test("an unverified sender can name candidates but never suspect or kill a member", () => {
    const h = harness();
    h.admit("b");
    const before = h.swim.stats.unknownSender;
    h.msg("stranger", { type: "gossip", updates: [{ id: "b", status: "dead", incarnation: 5 }] });
    h.msg("stranger", { type: "goodbye", incarnation: 0 });
    expect(h.swim.status("b")).toBe("alive");
    expect(h.swim.stats.unknownSender).toBe(before + 2);
  });

  test("suspicion is refuted by a higher incarnation; an older one is ignored", () => {
    const h = harness();
    h.admit("b");
    h.admit("c");
    h.msg("c", { type: "gossip", updates: [{ id: "b", status: "suspect", incarnation: 0, from: "c" }] });
    expect(h.swim.status("b")).toBe("suspect");
    h.msg("c", { type: "gossip", updates: [{ id: "b", status: "alive", incarnation: 0 }] });
    expect(h.swim.status("b")).toBe("suspect");
    h.msg("b", { type: "gossip", updates: [{ id: "b", status: "alive", incarnation: 1 }] });
    expect(h.swim.status("b")).toBe("alive");
    h.msg("c", { type: "gossip", updates: [{ id: "b", status: "dead", incarnation: 0, from: "c" }] });
    expect(h.swim.status("b")).toBe("alive");
  });

  test("we refute a suspicion of ourselves, and our local health worsens", () => {
    const h = harness();
    h.admit("b");
    h.msg("b", { type: "gossip", updates: [{ id: "a", status: "suspect", incarnation: 0, from: "b" }] });
    expect(h.swim.currentIncarnation).toBe(1);
    expect(h.swim.localHealth).toBe(1);
    h.msg("b", { type: "gossip", updates: [{ id: "a", status: "dead", incarnation: 0, from: "b" }] });
    expect(h.swim.currentIncarnation).toBe(1);
  });

  test("a suspicion expires into dead after Lifeguard's timeout, sooner with confirmations", () => {
    const timeToDead = (confirmers: string[]) => {
      const h = harness();
      for (const m of ["b", "c", "d", "e", "f"]) h.admit(m);
      h.msg("c", { type: "gossip", updates: [{ id: "b", status: "suspect", incarnation: 0, from: "c" }] });
      for (const f of confirmers)
        h.msg(f, { type: "gossip", updates: [{ id: "b", status: "suspect", incarnation: 0, from: f }] });
      return deadAt(h);
    };
    const lone = timeToDead([]);
    const confirmed = timeToDead(["d", "e"]);
    // 6 members: floor 4 s, Lifeguard's ceiling 24 s, k = 2 confirmations reach the floor.
    expect(confirmed).toBeGreaterThanOrEqual(4_000);
    expect(confirmed).toBeLessThan(5_000);
    expect(lone).toBeGreaterThan(confirmed);
    expect(lone).toBeLessThanOrEqual(24_200);
  });

  test("confirmations count distinct members other than the suspicion's source (memberlist's confirm)", () => {
    /** `members` besides us; c raises b's suspicion, then each of `news` says it again; when b dies. */
    const timeToDead = (news: string[], members = ["b", "c", "d", "e", "f"], refuteAfter = false) => {
      const h = harness();
      for (const m of members) h.admit(m);
      const suspect = (from: string, incarnation = 0) =>
        h.msg(from, { type: "gossip", updates: [{ id: "b", status: "suspect", incarnation, from }] });
      suspect("c");
      for (const f of news) suspect(f);
      if (refuteAfter) {
        // b refutes; c suspects it afresh: the confirmations of the old incarnation are gone.
        h.msg("b", { type: "gossip", updates: [{ id: "b", status: "alive", incarnation: 1 }] });
        suspect("c", 1);
        for (const f of news) suspect(f, 0);
      }
      return deadAt(h);
    };
    // 6 members: floor 4 s, Lifeguard's ceiling 24 s, k = 2.
    const lone = timeToDead([]);
    expect(lone).toBeGreaterThanOrEqual(24_000);
    // The source saying it again is not a confirmation.
    expect(timeToDead(["c", "c", "c"])).toBe(lone);
    // One other member, however often: one confirmation, log 2 / log 3 of the way down.
    const once = timeToDead(["d"]);
    expect(timeToDead(["d", "d", "d"])).toBe(once);
    expect(once).toBeGreaterThan(11_000);
    expect(once).toBeLessThan(12_000);
    // k distinct ones reach the floor.
    const two = timeToDead(["d", "e"]);
    expect(two).toBeGreaterThanOrEqual(4_000);
    expect(two).toBeLessThan(4_400);
    expect(timeToDead(["d", "e"], undefined, true)).toBe(lone);
    // 3 members: nobody else could confirm, so (as memberlist) k = 0 and the floor holds at once.
    const three = timeToDead([], ["b", "c"]);
    expect(three).toBeGreaterThanOrEqual(4_000);
    expect(three).toBeLessThan(4_400);
  });

  test("our own failed probe of a suspect raised by another confirms it; of our own suspicion, never", () => {
    const probePeriod = (h: ReturnType<typeof harness>) => {
      h.sent.length = 0;
      h.run(h.swim.handle({ type: "timer", timer: { kind: "swim-probe" } }));
      return h.sent.find((s) => s.msg.type === "ping")?.to;
    };
    const timeToDead = (h: ReturnType<typeof harness>, id: string) => {
      for (let t = 0; t <= 60_000; t += 200) {
        h.at(t);
        h.run(h.swim.handle({ type: "timer", timer: { kind: "swim-gossip" } }));
        if (h.swim.status(id) === "dead") return t;
      }
      return Number.POSITIVE_INFINITY;
    };
    const ours = (s: { msg: SwimMessage }) =>
      "updates" in s.msg &&
      s.msg.updates.some((u) => u.id === "b" && u.status === "suspect" && u.from === "a");

    // c raised it; nobody answers our pings: our probe of b, once over, is the first confirmation.
    const h = harness();
    for (const m of ["b", "c", "d", "e", "f"]) h.admit(m);
    h.msg("c", { type: "gossip", updates: [{ id: "b", status: "suspect", incarnation: 0, from: "c" }] });
    let periods = 0;
    while (probePeriod(h) !== "b" && periods++ < 20);
    expect(periods).toBeLessThan(20);
    probePeriod(h);
    // Re-gossiped (on the next ping) with us as its source, so the others count us too.
    expect(h.sent.some(ours)).toBe(true);
    // 6 members: floor 4 s, k = 2; without our confirmation c's alone leaves it at the 24 s ceiling.
    const confirmed = timeToDead(h, "b");
    expect(confirmed).toBeGreaterThan(11_000);
    expect(confirmed).toBeLessThan(12_000);

    // We raised it ourselves: our later failed probes of it are not independent (Lifeguard's ceiling).
    const own = harness();
    for (const m of ["b", "c", "d", "e", "f"]) own.admit(m);
    const target = probePeriod(own) as string;
    probePeriod(own);
    probePeriod(own);
    expect(own.swim.status(target)).toBe("suspect");
    for (let i = 0; i < 12; i++) probePeriod(own);
    expect(timeToDead(own, target)).toBeGreaterThan(23_000);
  });

  test("a member is suspected only after two probe periods in a row fail, probed back to back", () => {
    const h = harness();
    for (const m of ["b", "c", "d", "e"]) h.admit(m);
    const period = () => {
      h.sent.length = 0;
      h.run(h.swim.handle({ type: "timer", timer: { kind: "swim-probe" } }));
      const ping = h.sent.find((s) => s.msg.type === "ping");
      return ping?.to;
    };
    const first = period();
    expect(first).toBeDefined();
    // Nobody answers: the next period re-probes the same member instead of suspecting it.
    expect(period()).toBe(first);
    expect(h.swim.status(first as string)).toBe("alive");
    // The second silent period suspects it.
    period();
    expect(h.swim.status(first as string)).toBe("suspect");
    // An ack within a period clears the count: the next target is probed afresh.
    const next = period();
    const ping = h.sent.find((s) => s.msg.type === "ping");
    expect(ping?.msg.type).toBe("ping");
    const seq = ping?.msg.type === "ping" ? ping.msg.seq : -1;
    h.msg(next as string, { type: "ack", seq, updates: [] });
    expect(period()).not.toBe(next);
  });

  test("the candidate set is bounded", () => {
    const h = harness("a", [], { maxQueuedCandidates: 100 });
    h.admit("b");
    const many = Array.from({ length: 200 }, (_, i) => ({
      id: `z${i}`,
      status: "alive" as const,
      incarnation: 0,
    }));
    h.msg("b", { type: "gossip", updates: many });
    expect(h.verifies.length).toBeLessThanOrEqual(h.swim.config.maxCandidates + 1);
    expect(h.swim.stats.candidatesDropped).toBe(200 - h.swim.config.maxCandidates - 100);
  });

  test("candidates beyond the verifications in flight wait, and are verified as slots free", () => {
    const h = harness("a", [], { maxCandidates: 4 });
    h.admit("b");
    h.verifies.length = 0;
    const ids = Array.from({ length: 10 }, (_, i) => `z${i}`);
    h.msg("b", {
      type: "gossip",
      updates: ids.map((id) => ({ id, status: "alive" as const, incarnation: 0 })),
    });
    expect(h.verifies).toEqual(ids.slice(0, 4));
    // Each answer, yes or no, hands its slot to the oldest waiting candidate; none is lost.
    for (let i = 0; i < ids.length; i++)
      h.run(h.swim.handle({ type: "verified", id: ids[i] as string, ok: i !== 3 }));
    expect(h.verifies).toEqual(ids);
    expect(h.swim.stats.candidatesDropped).toBe(0);
    expect([...h.swim.liveMembers()].sort()).toEqual(["b", ...ids.filter((id) => id !== "z3")].sort());
  });

  test("a re-check counts once it is queued; one the full queue drops counts apart, and comes again", () => {
    const h = harness("a", [], { maxCandidates: 1, maxQueuedCandidates: 1, recheckFirstMs: 1_000 });
    h.admit("b");
    const alive = (id: string) => ({ id, status: "alive" as const, incarnation: 0 });
    h.msg("b", { type: "gossip", updates: [alive("x")] });
    h.run(h.swim.handle({ type: "verified", id: "x", ok: false }));
    // Its backoff runs out while the one slot and the one queue place are taken.
    h.at(1_000);
    h.msg("b", { type: "gossip", updates: [alive("y"), alive("z"), alive("x")] });
    expect(h.swim.stats).toMatchObject({ rechecks: 0, rechecksDropped: 1, candidatesDropped: 1 });
    expect(h.swim.refusedMembers(1_000).map((r) => r.id)).toEqual(["x"]);
    // A place frees: the next mention queues the re-check, and only that one counts.
    h.run(h.swim.handle({ type: "verified", id: "y", ok: true }));
    h.msg("b", { type: "gossip", updates: [alive("x")] });
    expect(h.swim.stats).toMatchObject({ rechecks: 1, rechecksDropped: 1 });
    h.run(h.swim.handle({ type: "verified", id: "z", ok: true }));
    expect(h.verifies.at(-1)).toBe("x");
  });

  test("a list that names members new to us is followed by push-pulls until two in a row name no one new", () => {
    const h = harness("a", [], { maxCandidates: 64 });
    h.admit("b");
    h.sent.length = 0;
    const list = (ids: string[]): SwimMessage => ({
      type: "sync",
      reply: false,
      members: ids.map((id) => ({ id, status: "alive" as const, incarnation: 0 })),
    });
    /** `from`'s list arrives (its new members verified); at `at` the gossip tick: the push-pulls asked. */
    const listThenTick = (from: string, ids: string[], at: number, verify: string[] = []) => {
      h.sent.length = 0;
      h.msg(from, list(ids));
      for (const id of verify) h.run(h.swim.handle({ type: "verified", id, ok: true }));
      h.at(at);
      h.run(h.swim.handle({ type: "timer", timer: { kind: "swim-gossip" } }));
      return h.sent.filter((s) => s.msg.type === "sync");
    };
    const asked = listThenTick("b", ["b", "c", "d"], 200, ["c", "d"]);
    expect(asked.filter((s) => s.msg.type === "sync" && s.msg.reply)).toHaveLength(1);
    // A list that teaches nothing new is confirmed by one more (its giver may lack what we lack)...
    const again = listThenTick(asked[0]?.to as string, ["b", "c", "d"], 400);
    expect(again.filter((s) => s.msg.type === "sync" && s.msg.reply)).toHaveLength(1);
    // ...and a second such list in a row ends it: no push-pull until the periodic one.
    expect(listThenTick(again[0]?.to as string, ["b", "c", "d"], 600)).toHaveLength(0);
    // A quiet list outside a resync (the periodic push-pull's answer) starts nothing.
    expect(listThenTick("b", ["b", "c", "d"], 800)).toHaveLength(0);
  });

  test("a joiner learns every member in one push-pull with its seed, and each member hears of it", () => {
    const j = harness("j", ["s"]);
    j.run(j.swim.start());
    expect(j.sent.some((s) => s.to === "s" && s.msg.type === "sync" && s.msg.reply)).toBe(true);
    const s = harness("s");
    s.admit("m");
    // The seed answers at once with its whole list, and verifies the joiner before admitting it.
    s.msg("j", { type: "sync", reply: true, members: [{ id: "j", status: "alive", incarnation: 0 }] });
    const reply = s.sent.find((x) => x.to === "j" && x.msg.type === "sync");
    expect(reply?.msg.type === "sync" && reply.msg.members.map((u) => u.id).sort()).toEqual(["m", "s"]);
    expect(s.verifies).toContain("j");
    expect(s.swim.status("j")).toBeUndefined();
    // The joiner verifies each member the list names, then tells it it is alive.
    j.sent.length = 0;
    if (reply?.msg.type === "sync") j.msg("s", reply.msg);
    expect(j.verifies.sort()).toEqual(["m", "s"]);
    for (const id of ["m", "s"]) j.run(j.swim.handle({ type: "verified", id, ok: true }));
    expect([...j.swim.liveMembers()].sort()).toEqual(["m", "s"]);
    const told = j.sent.filter((x) => x.msg.type === "gossip").map((x) => x.to);
    expect(told.sort()).toEqual(["m", "s"]);
    const hello = j.sent.find((x) => x.to === "m")?.msg;
    expect(hello).toEqual({ type: "gossip", updates: [{ id: "j", status: "alive", incarnation: 0 }] });
    // m, not knowing j, makes it a candidate to verify.
    const m = harness("m");
    m.admit("s");
    if (hello) m.msg("j", hello);
    expect(m.verifies).toContain("j");
  });
});

/** Gossip ticks from 0 to 60 s: when b is declared dead (∞: never). */
function deadAt(h: ReturnType<typeof harness>): number {
  for (let t = 0; t <= 60_000; t += 200) {
    h.at(t);
    h.run(h.swim.handle({ type: "timer", timer: { kind: "swim-gossip" } }));
    if (h.swim.status("b") === "dead") return t;
  }
  return Number.POSITIVE_INFINITY;
}
