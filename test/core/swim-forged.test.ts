/** SWIM's bounds on incarnations past what a clock allows (swim/swim.ts): forgeries and skewed clocks. */
import { describe, expect, test } from "vitest";
import { MAX_INCARNATION } from "../../src/core/node/swim/codec.js";
import { resolveSwimConfig } from "../../src/core/node/swim/config.js";
import type { MemberUpdate } from "../../src/core/node/swim/types.js";
import { harness } from "./swim-harness.js";

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
