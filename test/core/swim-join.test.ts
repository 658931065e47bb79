/** SWIM's joins (swim/swim.ts): push-pull answers, joining and refuting without a seed, run-time seeds. */
import { describe, expect, test } from "vitest";
import { MAX_INCARNATION } from "../../src/core/node/swim/codec.js";
import { Swim } from "../../src/core/node/swim/swim.js";
import type { SwimMessage } from "../../src/core/node/swim/types.js";
import { harness } from "./swim-harness.js";

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
    // b missed the refutation and probes us with its old suspicion: our ack says alive at 1, no new
    // refutation.
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
