import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { Broadcasts, leastSent, type Pending } from "../../src/core/node/swim/broadcasts.js";
import {
  decodeSwim,
  encodeSwim,
  MAX_INCARNATION,
  SwimDecodeError,
  swimSize,
} from "../../src/core/node/swim/codec.js";
import { resolveSwimConfig, type SwimConfigInput } from "../../src/core/node/swim/config.js";
import { Swim } from "../../src/core/node/swim/swim.js";
import type { MemberUpdate, SwimEffect, SwimMessage } from "../../src/core/node/swim/types.js";

const id = fc.stringMatching(/^[A-Za-z0-9._-]{1,64}$/);
const update: fc.Arbitrary<MemberUpdate> = fc
  .record({
    id,
    status: fc.constantFrom("alive", "suspect", "dead", "left"),
    incarnation: fc.nat({ max: Number.MAX_SAFE_INTEGER }),
    from: fc.option(id, { nil: undefined }),
  })
  .map((u) => {
    const { from, ...rest } = u;
    return from === undefined ? rest : { ...rest, from };
  }) as fc.Arbitrary<MemberUpdate>;
const updates = fc.array(update, { maxLength: 8 });
const seq = fc.nat({ max: 2 ** 40 });
const message: fc.Arbitrary<SwimMessage> = fc.oneof(
  fc.record({ type: fc.constant("ping" as const), seq, updates }),
  fc.record({ type: fc.constant("ping-req" as const), seq, target: id, updates }),
  fc.record({ type: fc.constant("ack" as const), seq, updates }),
  fc.record({ type: fc.constant("nack" as const), seq }),
  fc.record({ type: fc.constant("gossip" as const), updates }),
  fc.record({ type: fc.constant("sync" as const), members: updates, reply: fc.boolean() }),
  fc.record({ type: fc.constant("goodbye" as const), incarnation: fc.nat() }),
);

describe("swim codec", () => {
  test("round-trips every message, at exactly swimSize bytes", () => {
    fc.assert(
      fc.property(message, (m) => {
        const bytes = encodeSwim(m);
        expect(bytes.length).toBe(swimSize(m));
        expect(decodeSwim(bytes)).toEqual(m);
      }),
    );
  });

  test("refuses truncated, trailing or oversized input with a clear error", () => {
    const m: SwimMessage = { type: "gossip", updates: [{ id: "a", status: "alive", incarnation: 3 }] };
    const b = encodeSwim(m);
    expect(() => decodeSwim(b.subarray(0, b.length - 1))).toThrow(SwimDecodeError);
    expect(() => decodeSwim(Uint8Array.from([...b, 0]))).toThrow(/trailing/);
    expect(() => decodeSwim(b, 0)).toThrow(/at most 0/);
    expect(() => decodeSwim(Uint8Array.of(99))).toThrow(/unknown type/);
  });

  test("bounds incarnations to exact numbers: the ceiling round-trips, beyond it is refused", () => {
    const top: SwimMessage = { type: "goodbye", incarnation: MAX_INCARNATION };
    expect(decodeSwim(encodeSwim(top))).toEqual(top);
    const over = encodeSwim({ type: "goodbye", incarnation: 2 ** 55 });
    expect(() => decodeSwim(over)).toThrow(/incarnation too large/);
    const update = encodeSwim({
      type: "gossip",
      updates: [{ id: "a", status: "suspect", incarnation: 2 ** 54 }],
    });
    expect(() => decodeSwim(update)).toThrow(/incarnation too large/);
  });
});

describe("swim piggyback queue", () => {
  test("picks the k least-sent, newest first, as sorting the whole queue would", () => {
    fc.assert(
      fc.property(fc.array(fc.nat({ max: 5 }), { maxLength: 80 }), fc.nat({ max: 20 }), (sents, k) => {
        const all: Pending[] = sents.map((sent, order) => ({
          update: { id: `m${order}`, status: "alive", incarnation: 0 },
          sent,
          order,
        }));
        const naive = [...all].sort((a, b) => a.sent - b.sent || b.order - a.order).slice(0, k);
        expect(leastSent(all, k)).toEqual(naive);
      }),
    );
  });

  test("the bucketed queue takes what the whole-queue scan took, through pushes, replaces and drops", () => {
    // The reference: the queue as a Map scanned whole per take (the queue before buckets).
    const op = fc.oneof(
      fc.record({ push: fc.nat({ max: 30 }), inc: fc.nat({ max: 3 }) }),
      fc.record({
        max: fc.integer({ min: 1, max: 8 }),
        limit: fc.integer({ min: 1, max: 6 }),
        first: fc.boolean(),
      }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 300 }), (ops) => {
        const q = new Broadcasts();
        const ref = new Map<string, Pending>();
        let order = 0;
        for (const o of ops) {
          if ("push" in o) {
            const u: MemberUpdate = { id: `m${o.push}`, status: "alive", incarnation: o.inc };
            q.push(u);
            ref.set(u.id, { update: u, sent: 0, order: order++ });
            continue;
          }
          // `first` as the buddy system passes it: the queued update of one member (or none queued).
          const first = o.first ? ref.values().next().value?.update : undefined;
          const want: MemberUpdate[] = first === undefined ? [] : [first];
          if (ref.size > 0 && want.length < o.max) {
            for (const p of leastSent(ref.values(), o.max - want.length + (first === undefined ? 0 : 1))) {
              if (want.length >= o.max) break;
              if (p.update === first) continue;
              want.push(p.update);
              if (++p.sent >= o.limit) ref.delete(p.update.id);
            }
          }
          expect(q.take(o.max, o.limit, first)).toEqual(want);
          expect(q.size).toBe(ref.size);
        }
      }),
      { numRuns: 300 },
    );
  });
});

/** One Swim with a hand-driven clock; `verify` answers its verify-member effects. */
function harness(self = "a", seeds: string[] = [], config: SwimConfigInput = {}, bootAt = 0) {
  let now = bootAt;
  const swim = new Swim(self, seeds, { now: () => now, random: () => 0.5 }, config);
  const sent: { to: string; msg: SwimMessage }[] = [];
  const verifies: string[] = [];
  const run = (effects: SwimEffect[]) => {
    for (const e of effects) {
      if (e.type === "send") sent.push({ to: e.to, msg: e.msg });
      if (e.type === "verify-member") verifies.push(e.id);
    }
    return effects;
  };
  const admit = (who: string, incarnation = 0) => {
    run(
      swim.handle({
        type: "message",
        from: "x",
        msg: { type: "gossip", updates: [{ id: who, status: "alive", incarnation }] },
      }),
    );
    run(swim.handle({ type: "verified", id: who, ok: true }));
  };
  return {
    swim,
    sent,
    verifies,
    run,
    admit,
    at: (t: number) => {
      now = t;
    },
    msg: (from: string, msg: SwimMessage) => run(swim.handle({ type: "message", from, msg })),
  };
}

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
      for (let t = 0; t <= 60_000; t += 200) {
        h.at(t);
        h.run(h.swim.handle({ type: "timer", timer: { kind: "swim-gossip" } }));
        if (h.swim.status("b") === "dead") return t;
      }
      return Number.POSITIVE_INFINITY;
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
      for (let t = 0; t <= 60_000; t += 200) {
        h.at(t);
        h.run(h.swim.handle({ type: "timer", timer: { kind: "swim-gossip" } }));
        if (h.swim.status("b") === "dead") return t;
      }
      return Number.POSITIVE_INFINITY;
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

describe("push-pull answers", () => {
  test("an answer lists only what the asker's list lacks or holds older, and the asker ends up whole", () => {
    const s = harness("s");
    for (const id of ["m", "n", "o"]) s.admit(id);
    // The asker already holds m as s does, n at an older incarnation, and nothing of o.
    s.msg("q", {
      type: "sync",
      reply: true,
      members: [
        { id: "q", status: "alive", incarnation: 0 },
        { id: "m", status: "alive", incarnation: 0 },
        { id: "n", status: "dead", incarnation: 0 },
        { id: "s", status: "alive", incarnation: 0 },
      ],
    });
    const reply = s.sent.find((x) => x.to === "q" && x.msg.type === "sync" && !x.msg.reply)?.msg;
    // s itself always; o (lacked); not m (same belief) and not n (the asker's dead outranks alive).
    expect(reply?.type === "sync" && reply.members.map((u) => u.id).sort()).toEqual(["o", "s"]);
    // A list without the asker's gets the whole list, as before.
    s.sent.length = 0;
    s.msg("r", { type: "sync", reply: true, members: [{ id: "r", status: "alive", incarnation: 0 }] });
    const whole = s.sent.find((x) => x.to === "r" && x.msg.type === "sync")?.msg;
    expect(whole?.type === "sync" && whole.members.map((u) => u.id).sort()).toEqual(["m", "n", "o", "s"]);
  });
});

describe("joining and refuting without a seed's help", () => {
  test("a node whose seeds are out of reach asks the first member it admits for the member list", () => {
    const r = harness("r", ["s"]);
    r.run(r.swim.start());
    r.sent.length = 0;
    // A member that still holds r alive (r restarted inside a partition) pings it: verified, admitted, asked.
    r.msg("b", { type: "ping", seq: 1, updates: [] });
    r.run(r.swim.handle({ type: "verified", id: "b", ok: true }));
    expect(r.sent.some((x) => x.to === "b" && x.msg.type === "sync" && x.msg.reply)).toBe(true);
    // b's list arrives: the members it names become candidates, and later admissions ask nobody.
    r.msg("b", {
      type: "sync",
      reply: false,
      members: [
        { id: "b", status: "alive", incarnation: 0 },
        { id: "c", status: "alive", incarnation: 0 },
      ],
    });
    expect(r.verifies).toContain("c");
    r.sent.length = 0;
    r.run(r.swim.handle({ type: "verified", id: "c", ok: true }));
    expect(r.sent.filter((x) => x.msg.type === "sync")).toEqual([]);
  });

  test("a member we hold suspect or dead hears it in our ack to its ping, and refutes", () => {
    const h = harness();
    h.admit("b");
    h.admit("c");
    h.msg("c", { type: "gossip", updates: [{ id: "b", status: "dead", incarnation: 0, from: "c" }] });
    expect(h.swim.status("b")).toBe("dead");
    // Drain the queued news of b's death, so only the ack's own notice can tell b.
    for (let i = 0; i < 20; i++) h.run(h.swim.handle({ type: "timer", timer: { kind: "swim-gossip" } }));
    h.sent.length = 0;
    h.msg("b", { type: "ping", seq: 7, updates: [] });
    const ack = h.sent.find((x) => x.to === "b" && x.msg.type === "ack");
    expect(ack?.msg.type === "ack" && ack.msg.updates).toContainEqual(
      expect.objectContaining({ id: "b", status: "dead", incarnation: 0 }),
    );
    // b, on its side, refutes on hearing it from a member.
    const b = harness("b");
    b.admit("a");
    b.msg("a", { type: "ack", seq: 7, updates: [{ id: "b", status: "dead", incarnation: 0 }] });
    expect(b.swim.currentIncarnation).toBe(1);
  });

  test("a suspicion of us at the incarnation ceiling is refused, not refuted: we stay below it", () => {
    const h = harness();
    h.admit("b");
    h.msg("b", { type: "gossip", updates: [{ id: "a", status: "suspect", incarnation: MAX_INCARNATION }] });
    expect(h.swim.currentIncarnation).toBe(0);
    expect(h.swim.stats).toMatchObject({ refuted: 0, implausibleIncarnations: 1 });
    // A real suspicion is still refuted as ever.
    h.msg("b", { type: "gossip", updates: [{ id: "a", status: "suspect", incarnation: 0, from: "b" }] });
    expect(h.swim.currentIncarnation).toBe(1);
  });

  test("old news of our suspicion gets our current incarnation back to its sender", () => {
    const h = harness();
    h.admit("b");
    h.msg("b", { type: "gossip", updates: [{ id: "a", status: "suspect", incarnation: 0, from: "b" }] });
    expect(h.swim.currentIncarnation).toBe(1);
    for (let i = 0; i < 20; i++) h.run(h.swim.handle({ type: "timer", timer: { kind: "swim-gossip" } }));
    // b missed the refutation and probes us with its old suspicion: our ack says alive at 1, no new refutation.
    h.sent.length = 0;
    h.msg("b", { type: "ping", seq: 3, updates: [{ id: "a", status: "suspect", incarnation: 0 }] });
    const ack = h.sent.find((x) => x.to === "b" && x.msg.type === "ack");
    expect(ack?.msg.type === "ack" && ack.msg.updates).toContainEqual({
      id: "a",
      status: "alive",
      incarnation: 1,
    });
    expect(h.swim.currentIncarnation).toBe(1);
  });

  test("a probe of a suspect carries its suspicion even after the queued news ran out", () => {
    const h = harness();
    h.admit("b");
    h.admit("c");
    h.msg("c", { type: "gossip", updates: [{ id: "b", status: "suspect", incarnation: 0, from: "c" }] });
    for (let i = 0; i < 20; i++) h.run(h.swim.handle({ type: "timer", timer: { kind: "swim-gossip" } }));
    let ping: SwimMessage | undefined;
    for (let i = 0; i < 6 && ping === undefined; i++) {
      h.sent.length = 0;
      h.run(h.swim.handle({ type: "timer", timer: { kind: "swim-probe" } }));
      ping = h.sent.find((x) => x.to === "b" && x.msg.type === "ping")?.msg;
    }
    expect(ping?.type === "ping" && ping.updates[0]).toMatchObject({ id: "b", status: "suspect" });
  });
});

describe("incarnations past what a clock allows (forged)", () => {
  // Wall-clock ms, as the daemon's incarnations are; the defaults' allowances.
  const T = Date.UTC(2026, 0, 1);
  const {
    incarnationSkewMs: S,
    incarnationRefutations: R,
    incarnationRefuteMarginMs: M,
  } = resolveSwimConfig();

  test("a member's suspicion or death of another at the ceiling is refused; the victim stays alive and refutes", () => {
    const h = harness("a", [], {}, T);
    h.admit("b", T);
    h.admit("c", T);
    for (const status of ["suspect", "dead", "left"] as const)
      h.msg("c", { type: "gossip", updates: [{ id: "b", status, incarnation: MAX_INCARNATION, from: "c" }] });
    // Alive at the ceiling, then suspect at it, would pin b as surely.
    h.msg("c", {
      type: "sync",
      reply: false,
      members: [{ id: "b", status: "alive", incarnation: MAX_INCARNATION }],
    });
    expect(h.swim.status("b")).toBe("alive");
    expect(h.swim.memberViews().find((m) => m.id === "b")?.incarnation).toBe(T);
    expect(h.swim.stats.implausibleIncarnations).toBe(4);
    // b can still be suspected and refute, as ever.
    h.msg("c", { type: "gossip", updates: [{ id: "b", status: "suspect", incarnation: T, from: "c" }] });
    expect(h.swim.status("b")).toBe("suspect");
    h.msg("b", { type: "gossip", updates: [{ id: "b", status: "alive", incarnation: T + 1 }] });
    expect(h.swim.status("b")).toBe("alive");
  });

  test("a large but plausible incarnation is believed: a clock ahead by the skew allowed, many refutations", () => {
    const h = harness("a", [], {}, T);
    h.admit("b", T);
    h.admit("c", T);
    h.msg("b", { type: "gossip", updates: [{ id: "b", status: "alive", incarnation: T + S + R }] });
    expect(h.swim.memberViews().find((m) => m.id === "b")?.incarnation).toBe(T + S + R);
    h.msg("c", { type: "gossip", updates: [{ id: "c", status: "alive", incarnation: T + S + R + 1 }] });
    expect(h.swim.memberViews().find((m) => m.id === "c")?.incarnation).toBe(T);
    expect(h.swim.stats.implausibleIncarnations).toBe(1);
    // The bound moves with our clock: the same news an hour later is believed.
    h.at(T + 3_600_000);
    h.msg("c", { type: "gossip", updates: [{ id: "c", status: "alive", incarnation: T + S + R + 1 }] });
    expect(h.swim.memberViews().find((m) => m.id === "c")?.incarnation).toBe(T + S + R + 1);
  });

  test("our answer to the top suspicion is believed by a member whose clock is the margin less 2 ms behind", () => {
    const a = harness("a", [], {}, T);
    a.admit("b", T);
    // The highest suspicion of us we refute: the others' bound less the margin.
    const top = T + R + S - M;
    a.msg("b", {
      type: "gossip",
      updates: [{ id: "a", status: "suspect", incarnation: top + 1, from: "b" }],
    });
    expect(a.swim.stats.implausibleIncarnations).toBe(1);
    a.msg("b", { type: "gossip", updates: [{ id: "a", status: "suspect", incarnation: top, from: "b" }] });
    // Above our incarnation, so not of this life: outbid by two (self-news.ts), no refutation.
    expect(a.swim.currentIncarnation).toBe(top + 2);
    a.run(a.swim.handle({ type: "timer", timer: { kind: "swim-gossip" } }));
    const said = a.sent
      .flatMap((x) => ("updates" in x.msg ? x.msg.updates : []))
      .find((u) => u.id === "a" && u.status === "alive");
    expect(said?.incarnation).toBe(top + 2);
    // c's clock reads the margin (less 2 ms) behind ours; it held a suspect at the suspicion's incarnation.
    const c = harness("c", [], {}, T - (M - 2));
    c.admit("a", T);
    c.admit("b", T);
    c.msg("b", { type: "gossip", updates: [{ id: "a", status: "suspect", incarnation: top, from: "b" }] });
    expect(c.swim.status("a")).toBe("suspect");
    c.msg("a", { type: "gossip", updates: [said as MemberUpdate] });
    expect(c.swim.status("a")).toBe("alive");
    expect(c.swim.stats.implausibleIncarnations).toBe(0);
  });

  test("one forgery at the top of what others accept holds its victim out only for the refute margin", () => {
    // c's clock reads as a's: c accepts a suspicion of a at T + R + S (its bound), which a, held to
    // that bound less the margin, cannot outbid until its clock has gained the margin. A forger that
    // keeps forging keeps a out for as long: the credential is where trust ends.
    const c = harness("c", [], {}, T);
    c.admit("a", T);
    c.admit("b", T);
    const forged = { id: "a", status: "suspect" as const, incarnation: T + R + S, from: "b" };
    c.msg("b", { type: "gossip", updates: [forged] });
    expect(c.swim.status("a")).toBe("suspect");
    const a = harness("a", [], {}, T);
    a.admit("b", T);
    a.at(T + M - 1);
    a.msg("b", { type: "gossip", updates: [forged] });
    expect(a.swim.stats).toMatchObject({ refuted: 0, implausibleIncarnations: 1 });
    a.at(T + M);
    a.msg("b", { type: "gossip", updates: [forged] });
    expect(a.swim.currentIncarnation).toBe(T + R + S + 2);
    c.at(T + M);
    c.msg("a", { type: "gossip", updates: [{ id: "a", status: "alive", incarnation: T + R + S + 2 }] });
    expect(c.swim.status("a")).toBe("alive");
    expect(M).toBeLessThan(S); // the margin is what bounds it, well under the skew allowed
  });

  test("a forged leave at the top: the victim is told again on its next ping once it can refute", () => {
    // Not only suspect or dead: a member held as left that pings us is evidently not gone, so it hears
    // it with our ack, not only at its next push-pull (30 s or more), after its first hearing was
    // refused (past what it may refute yet) and the news ran out of retransmits.
    const c = harness("c", [], {}, T);
    c.admit("a", T);
    c.admit("b", T);
    const forged: MemberUpdate = { id: "a", status: "left", incarnation: T + R + S, from: "b" };
    c.msg("b", { type: "gossip", updates: [forged] });
    expect(c.swim.status("a")).toBe("left");
    for (let i = 0; i < 50; i++) c.run(c.swim.handle({ type: "timer", timer: { kind: "swim-gossip" } }));
    c.at(T + M);
    c.sent.length = 0;
    c.msg("a", { type: "ping", seq: 1, updates: [] });
    const told = c.sent.flatMap((x) => (x.to === "a" && x.msg.type === "ack" ? x.msg.updates : []));
    expect(told).toContainEqual(expect.objectContaining({ id: "a", status: "left", incarnation: T + R + S }));
    const a = harness("a", [], {}, T);
    a.admit("c", T);
    a.at(T + M);
    a.msg("c", { type: "ack", seq: 1, updates: told });
    expect(a.swim.currentIncarnation).toBe(T + R + S + 2);
  });

  test("a refute margin past the skew is refused: it would take a member's own refutations", () => {
    // Skew 0 with the default margin: a member's bound (clock + R − M) would sit below its own boot
    // incarnation, so it could never refute a suspicion of itself.
    expect(() => resolveSwimConfig({ incarnationSkewMs: 0, incarnationRefutations: 1 })).toThrow(
      /incarnationRefuteMarginMs must not exceed incarnationSkewMs \+ 1/,
    );
    expect(() => resolveSwimConfig({ incarnationRefuteMarginMs: S + 2 })).toThrow(
      /incarnationRefuteMarginMs/,
    );
    // At the limit a member still refutes up to its clock + R, which a member at its clock accepts.
    const tight = { incarnationSkewMs: 0, incarnationRefutations: 1, incarnationRefuteMarginMs: 1 };
    const a = harness("a", [], tight, T);
    a.admit("b", T);
    a.msg("b", { type: "gossip", updates: [{ id: "a", status: "suspect", incarnation: T, from: "b" }] });
    expect(a.swim.stats).toMatchObject({ refuted: 1, implausibleIncarnations: 0 });
    expect(a.swim.currentIncarnation).toBe(T + 1);
    const c = harness("c", [], tight, T);
    c.admit("a", T);
    c.msg("a", { type: "gossip", updates: [{ id: "a", status: "alive", incarnation: T + 1 }] });
    expect(c.swim.memberViews().find((m) => m.id === "a")?.incarnation).toBe(T + 1);
  });

  test("a clock far off at boot: the broken node loses, never a healthy member", () => {
    // Booted at epoch 0: the others' (real) incarnations are implausible to it, its own is believed.
    const lost = harness("z", [], {}, 0);
    lost.admit("b", T);
    expect(lost.swim.status("b")).toBeUndefined();
    expect(lost.swim.stats.implausibleIncarnations).toBe(1);
    const h = harness("a", [], {}, T);
    h.admit("z", 0);
    expect(h.swim.status("z")).toBe("alive");
    // Booted a day ahead: its news of itself is refused, so a suspicion of it cannot be refuted.
    const ahead = T + 86_400_000;
    h.admit("y", T);
    h.msg("z", { type: "gossip", updates: [{ id: "y", status: "alive", incarnation: ahead }] });
    h.msg("y", { type: "gossip", updates: [{ id: "y", status: "alive", incarnation: ahead }] });
    expect(h.swim.memberViews().find((m) => m.id === "y")?.incarnation).toBe(T);
    expect(h.swim.stats.implausibleIncarnations).toBe(2);
  });
});

describe("seeds found at run time", () => {
  test("a seed input asks that seed for the member list once, and again while alone", () => {
    const s = new Swim("me", [], { now: () => 0, random: () => 0.5 });
    s.start();
    const out = s.handle({ type: "seed", id: "s1" });
    expect(out).toEqual([
      {
        type: "send",
        to: "s1",
        msg: { type: "sync", reply: true, members: [{ id: "me", status: "alive", incarnation: 0 }] },
      },
    ]);
    expect(s.handle({ type: "seed", id: "s1" })).toEqual([]);
    expect(s.handle({ type: "seed", id: "me" })).toEqual([]);
    // Alone at the next probe: the seed is asked again.
    const probe = s.handle({ type: "timer", timer: { kind: "swim-probe" } });
    expect(probe.some((e) => e.type === "send" && e.to === "s1" && e.msg.type === "sync")).toBe(true);
  });
});

describe("a member back from dead or left is verified again, as a first admission is", () => {
  /** a holds b and c; c's news kills b (or b leaves), and the news is drained. */
  function gone(status: "dead" | "left") {
    const h = harness();
    h.admit("b");
    h.admit("c");
    if (status === "dead")
      h.msg("c", { type: "gossip", updates: [{ id: "b", status: "dead", incarnation: 0, from: "c" }] });
    else h.msg("b", { type: "goodbye", incarnation: 0 });
    expect(h.swim.status("b")).toBe(status);
    h.verifies.length = 0;
    return h;
  }

  for (const status of ["dead", "left"] as const)
    test(`${status}: its own refutation (or restart) is only a candidate until our verification says yes`, () => {
      const h = gone(status);
      h.msg("b", { type: "ping", seq: 1, updates: [{ id: "b", status: "alive", incarnation: 1 }] });
      expect(h.verifies).toEqual(["b"]);
      expect(h.swim.status("b")).toBe(status);
      expect(h.swim.liveMembers()).toEqual(["c"]);
      h.run(h.swim.handle({ type: "verified", id: "b", ok: true }));
      expect(h.swim.status("b")).toBe("alive");
      expect(h.swim.memberViews().find((m) => m.id === "b")?.incarnation).toBe(1);
    });

  test("a relay's word that a dead member is alive again starts the same check", () => {
    const h = gone("dead");
    h.msg("c", { type: "gossip", updates: [{ id: "b", status: "alive", incarnation: 5 }] });
    expect(h.verifies).toEqual(["b"]);
    expect(h.swim.status("b")).toBe("dead");
    // Older or equal news of a dead member names no one.
    const g = gone("dead");
    g.msg("c", { type: "gossip", updates: [{ id: "b", status: "alive", incarnation: 0 }] });
    expect(g.verifies).toEqual([]);
  });

  test("one that fails the re-check stays out, refused with its reason, and is asked again on a newer life", () => {
    const h = gone("dead");
    h.at(1_000);
    h.msg("b", { type: "gossip", updates: [{ id: "b", status: "alive", incarnation: 1 }] });
    h.run(h.swim.handle({ type: "verified", id: "b", ok: false, reason: "wrong-model: serves m2" }));
    expect(h.swim.status("b")).toBe("dead");
    expect(h.swim.liveMembers()).toEqual(["c"]);
    expect(h.swim.refusedMembers(1_000)).toEqual([
      expect.objectContaining({ id: "b", reason: "wrong-model: serves m2", refusals: 1 }),
    ]);
    // The same life again: no new check before its backoff.
    h.msg("b", { type: "gossip", updates: [{ id: "b", status: "alive", incarnation: 1 }] });
    expect(h.verifies).toEqual(["b"]);
    // A newer life (a restart, fixed): checked again, and admitted once it passes.
    h.at(10_000);
    h.msg("b", { type: "gossip", updates: [{ id: "b", status: "alive", incarnation: 9_000 }] });
    expect(h.verifies).toEqual(["b", "b"]);
    h.run(h.swim.handle({ type: "verified", id: "b", ok: true }));
    expect(h.swim.status("b")).toBe("alive");
    expect(h.swim.refusedMembers(10_000)).toEqual([]);
  });

  test("a verification answered after newer news of its death leaves it dead", () => {
    const h = gone("dead");
    h.msg("b", { type: "gossip", updates: [{ id: "b", status: "alive", incarnation: 1 }] });
    h.msg("c", { type: "gossip", updates: [{ id: "b", status: "dead", incarnation: 1, from: "c" }] });
    h.run(h.swim.handle({ type: "verified", id: "b", ok: true }));
    expect(h.swim.status("b")).toBe("dead");
  });

  test("a suspect that refutes never left: it stays a member with no new check", () => {
    const h = harness();
    h.admit("b");
    h.admit("c");
    h.msg("c", { type: "gossip", updates: [{ id: "b", status: "suspect", incarnation: 0, from: "c" }] });
    h.verifies.length = 0;
    h.msg("b", { type: "gossip", updates: [{ id: "b", status: "alive", incarnation: 1 }] });
    expect(h.swim.status("b")).toBe("alive");
    expect(h.verifies).toEqual([]);
  });

  test("news of a newer life during the check is the incarnation a yes brings it back at", () => {
    const h = gone("dead");
    h.msg("b", { type: "gossip", updates: [{ id: "b", status: "alive", incarnation: 1 }] });
    h.msg("c", { type: "gossip", updates: [{ id: "b", status: "alive", incarnation: 7 }] });
    // One check for the id, however much news names it meanwhile.
    expect(h.verifies).toEqual(["b"]);
    h.run(h.swim.handle({ type: "verified", id: "b", ok: true }));
    expect(h.swim.status("b")).toBe("alive");
    expect(h.swim.memberViews().find((m) => m.id === "b")?.incarnation).toBe(7);
  });

  test("a tombstone forgotten while its check is in flight: a yes admits it as a new member", () => {
    const h = gone("dead");
    h.msg("b", { type: "gossip", updates: [{ id: "b", status: "alive", incarnation: 1 }] });
    h.at(resolveSwimConfig({}).deadRetainMs + 1);
    h.run(h.swim.handle({ type: "timer", timer: { kind: "swim-gossip" } }));
    expect(h.swim.status("b")).toBeUndefined();
    h.run(h.swim.handle({ type: "verified", id: "b", ok: true }));
    expect(h.swim.status("b")).toBe("alive");
    expect(h.swim.memberViews().find((m) => m.id === "b")?.incarnation).toBe(1);
  });

  test("news of our own death is refuted, never a check of ourselves", () => {
    const h = gone("dead");
    const before = h.swim.currentIncarnation;
    h.msg("c", { type: "gossip", updates: [{ id: "a", status: "dead", incarnation: before, from: "c" }] });
    expect(h.swim.currentIncarnation).toBe(before + 1);
    expect(h.verifies).toEqual([]);
  });
});
