/**
 * SWIM's checks of a member's new life (swim/swim.ts): a verified member back from the dead joins the
 * probe round under way; a live member's restart is checked as a revival is, and one whose new life is
 * refused is out, nothing said of it taken from relays until a check of it passes again.
 */
import { describe, expect, test } from "vitest";
import { resolveSwimConfig, type SwimConfigInput } from "../../src/core/node/swim/config.js";
import { Swim } from "../../src/core/node/swim/swim.js";
import type { SwimEffect, SwimMessage } from "../../src/core/node/swim/types.js";

function harness(config: SwimConfigInput = {}) {
  let now = 0;
  const swim = new Swim("a", [], { now: () => now, random: () => 0.5 }, config);
  const sent: { to: string; msg: SwimMessage }[] = [];
  const verifies: string[] = [];
  const downs: string[] = [];
  const run = (effects: SwimEffect[]) => {
    for (const e of effects) {
      if (e.type === "send") sent.push({ to: e.to, msg: e.msg });
      if (e.type === "verify-member") verifies.push(e.id);
      if (e.type === "member-down") downs.push(e.id);
    }
    return effects;
  };
  const msg = (from: string, m: SwimMessage) => run(swim.handle({ type: "message", from, msg: m }));
  const verified = (id: string, ok: boolean) => run(swim.handle({ type: "verified", id, ok }));
  const admit = (who: string, incarnation = 0) => {
    msg("x", { type: "gossip", updates: [{ id: who, status: "alive", incarnation }] });
    verified(who, true);
  };
  /** One probe period: the member pinged, which acks at once (so no retry skews the order). */
  const probe = (): string | undefined => {
    const before = sent.length;
    now += 1_000;
    run(swim.handle({ type: "timer", timer: { kind: "swim-probe" } }));
    const ping = sent.slice(before).find((s) => s.msg.type === "ping");
    if (ping === undefined || ping.msg.type !== "ping") return undefined;
    msg(ping.to, { type: "ack", seq: ping.msg.seq, updates: [] });
    return ping.to;
  };
  const incarnationOf = (id: string) => swim.memberViews().find((m) => m.id === id)?.incarnation;
  const at = (t: number) => {
    now = t;
  };
  return { swim, sent, verifies, downs, msg, verified, admit, probe, incarnationOf, at };
}

describe("a verified member back from the dead", () => {
  test("is probed within the pass under way, not only after the next shuffle", () => {
    const h = harness();
    for (const id of ["b", "c", "d", "e"]) h.admit(id);
    h.msg("c", { type: "gossip", updates: [{ id: "b", status: "dead", incarnation: 0, from: "c" }] });
    // The pass is shuffled from the live members (b dead): c, d and e, one probed now.
    const first = h.probe();
    expect(["c", "d", "e"]).toContain(first);
    h.msg("b", { type: "ping", seq: 1, updates: [{ id: "b", status: "alive", incarnation: 5 }] });
    h.verified("b", true);
    expect(h.swim.status("b")).toBe("alive");
    // The two left in this pass, and b among them: three probes in all, not four.
    const rest = [h.probe(), h.probe(), h.probe()];
    expect(rest).toContain("b");
    expect(new Set([first, ...rest]).size).toBe(4);
  });
});

describe("a live member's new life (a restart SWIM never saw as a death)", () => {
  test("is checked as a revival is; refused, it is out at once, and that is ours alone", () => {
    const h = harness();
    h.admit("b");
    h.admit("c");
    h.verifies.length = 0;
    // b restarted within its suspicion time: its new life (boot-time incarnation) told by itself.
    h.msg("b", { type: "ping", seq: 1, updates: [{ id: "b", status: "alive", incarnation: 5_000 }] });
    expect(h.verifies).toEqual(["b"]);
    // Still a member while checked: a restart that passes costs nothing.
    expect(h.swim.status("b")).toBe("alive");
    h.verified("b", false);
    expect(h.swim.status("b")).toBe("dead");
    expect(h.downs).toEqual(["b"]);
    expect(h.swim.liveMembers()).toEqual(["c"]);
    expect(h.swim.refusedMembers(0)).toEqual([expect.objectContaining({ id: "b" })]);
    // Our refusal is not news for others: no death of b said to anyone.
    const sent = h.sent.length;
    h.probe();
    h.msg("c", { type: "sync", members: [], reply: true });
    const told = h.sent
      .slice(sent)
      .flatMap((s) => (s.msg.type === "sync" ? s.msg.members : "updates" in s.msg ? s.msg.updates : []));
    expect(told.filter((u) => u.id === "b" && u.status !== "alive")).toEqual([]);
  });

  test("a life that passes stays a member; a suspect's refutation is no new life", () => {
    const h = harness();
    h.admit("b");
    h.admit("c");
    h.verifies.length = 0;
    h.msg("c", { type: "gossip", updates: [{ id: "b", status: "alive", incarnation: 5_000 }] });
    expect(h.verifies).toEqual(["b"]);
    h.verified("b", true);
    expect(h.swim.status("b")).toBe("alive");
    expect(h.incarnationOf("b")).toBe(5_000);
    h.msg("c", { type: "gossip", updates: [{ id: "b", status: "suspect", incarnation: 5_000, from: "c" }] });
    h.msg("b", { type: "gossip", updates: [{ id: "b", status: "alive", incarnation: 5_001 }] });
    expect(h.swim.status("b")).toBe("alive");
    expect(h.verifies).toEqual(["b"]);
  });
});

describe("a member whose new life was refused", () => {
  /** a holds b and c; b's new life is refused (a restart on another model, say). */
  function refused() {
    const h = harness();
    h.admit("b");
    h.admit("c");
    h.msg("b", { type: "ping", seq: 1, updates: [{ id: "b", status: "alive", incarnation: 5_000 }] });
    h.verified("b", false);
    expect(h.swim.status("b")).toBe("dead");
    h.verifies.length = 0;
    return h;
  }

  test("is no longer a trusted sender: it cannot suspect or kill a member", () => {
    const h = refused();
    h.msg("b", { type: "gossip", updates: [{ id: "c", status: "dead", incarnation: 0, from: "b" }] });
    h.msg("b", { type: "gossip", updates: [{ id: "c", status: "suspect", incarnation: 0, from: "b" }] });
    expect(h.swim.status("c")).toBe("alive");
  });

  test("relays' news of it is not taken until a check of a newer life passes", () => {
    const h = refused();
    // News of its old life from a member: nothing of it is taken.
    h.msg("c", { type: "gossip", updates: [{ id: "b", status: "left", incarnation: 6_000 }] });
    expect(h.swim.status("b")).toBe("dead");
    expect(h.incarnationOf("b")).toBe(5_000);
    // A newer life (past the re-check floor) is asked about, a fresh check, and taken once it passes.
    h.at(resolveSwimConfig({}).recheckAfterChangeMs + 1);
    h.msg("c", { type: "gossip", updates: [{ id: "b", status: "alive", incarnation: 9_000 }] });
    expect(h.verifies).toEqual(["b"]);
    expect(h.swim.status("b")).toBe("dead");
    h.verified("b", true);
    expect(h.swim.status("b")).toBe("alive");
    expect(h.incarnationOf("b")).toBe(9_000);
    h.msg("b", { type: "gossip", updates: [{ id: "c", status: "suspect", incarnation: 0, from: "b" }] });
    expect(h.swim.status("c")).toBe("suspect");
  });

  test("one back from the dead whose check failed is no trusted sender either", () => {
    const h = harness();
    h.admit("b");
    h.admit("c");
    h.msg("c", { type: "gossip", updates: [{ id: "b", status: "dead", incarnation: 0, from: "c" }] });
    h.msg("b", { type: "ping", seq: 1, updates: [{ id: "b", status: "alive", incarnation: 1 }] });
    h.verified("b", false);
    h.msg("b", { type: "gossip", updates: [{ id: "c", status: "dead", incarnation: 0, from: "b" }] });
    expect(h.swim.status("c")).toBe("alive");
  });
});

describe("a live member refused and re-checked after its backoff (no restart: a clock set right)", () => {
  test("passing, it is alive again at once, and its death (ours alone) is never said", () => {
    const h = harness();
    h.admit("b");
    h.admit("c");
    h.msg("b", { type: "ping", seq: 1, updates: [{ id: "b", status: "alive", incarnation: 5_000 }] });
    h.verified("b", false);
    h.verifies.length = 0;
    // Its backoff over, its next ping (which carries no incarnation) asks again; the check passes.
    h.at(resolveSwimConfig({}).recheckFirstMs + 1);
    h.msg("b", { type: "ping", seq: 2, updates: [] });
    expect(h.verifies).toEqual(["b"]);
    h.verified("b", true);
    expect(h.swim.status("b")).toBe("alive");
    expect(h.incarnationOf("b")).toBe(5_000);
    const sent = h.sent.length;
    h.msg("c", { type: "sync", members: [], reply: true });
    h.msg("b", { type: "ping", seq: 3, updates: [] });
    const told = h.sent
      .slice(sent)
      .flatMap((s) => (s.msg.type === "sync" ? s.msg.members : "updates" in s.msg ? s.msg.updates : []));
    expect(told.filter((u) => u.id === "b" && u.status !== "alive")).toEqual([]);
  });
});

describe("a live member put out by us, its refusal forgotten (more refused than remembered)", () => {
  test("is still no trusted sender, and its death (ours alone) is still never said", () => {
    const h = harness({ maxRefused: 1 });
    h.admit("b");
    h.admit("c");
    h.msg("b", { type: "ping", seq: 1, updates: [{ id: "b", status: "alive", incarnation: 5_000 }] });
    h.verified("b", false);
    // Another refusal takes the only place: b's refusal is forgotten, b still put out.
    h.msg("c", { type: "gossip", updates: [{ id: "z", status: "alive", incarnation: 1 }] });
    h.verified("z", false);
    expect(h.swim.refusedMembers(0).map((r) => r.id)).toEqual(["z"]);
    expect(h.swim.status("b")).toBe("dead");
    h.msg("b", { type: "gossip", updates: [{ id: "c", status: "dead", incarnation: 0, from: "b" }] });
    expect(h.swim.status("c")).toBe("alive");
    const sent = h.sent.length;
    h.msg("c", { type: "sync", members: [], reply: true });
    const told = h.sent
      .slice(sent)
      .flatMap((s) => (s.msg.type === "sync" ? s.msg.members : "updates" in s.msg ? s.msg.updates : []));
    expect(told.filter((u) => u.id === "b" && u.status !== "alive")).toEqual([]);
  });
});

describe("a live member's newer life told while a check of its new life runs", () => {
  /** b's life 5,000 being checked when life 6,000 is told: the answer was perhaps read of 5,000. */
  function twoLives() {
    const h = harness();
    h.admit("b");
    h.admit("c");
    h.verifies.length = 0;
    h.msg("b", { type: "ping", seq: 1, updates: [{ id: "b", status: "alive", incarnation: 5_000 }] });
    h.msg("c", { type: "gossip", updates: [{ id: "b", status: "alive", incarnation: 6_000 }] });
    expect(h.verifies).toEqual(["b"]);
    return h;
  }

  test("a yes is no check of the newer life: it is checked next", () => {
    const h = twoLives();
    h.verified("b", true);
    expect(h.swim.status("b")).toBe("alive");
    expect(h.verifies).toEqual(["b", "b"]);
    h.verified("b", false);
    expect(h.swim.status("b")).toBe("dead");
  });

  test("a no puts it out, and the newer life is asked about at the re-check floor, not its backoff", () => {
    const h = twoLives();
    h.verified("b", false);
    expect(h.swim.status("b")).toBe("dead");
    h.at(resolveSwimConfig({}).recheckAfterChangeMs + 1);
    h.msg("b", { type: "ping", seq: 2, updates: [] });
    expect(h.verifies).toEqual(["b", "b"]);
    h.verified("b", true);
    expect(h.swim.status("b")).toBe("alive");
    expect(h.incarnationOf("b")).toBe(6_000);
  });
});

describe("many live members' new lives at once (a whole cluster restarted)", () => {
  test("are checked at most maxCandidates at a time, the rest as answers come, none skipped", () => {
    const h = harness({ maxCandidates: 2 });
    for (const id of ["b", "c", "d", "e"]) h.admit(id);
    h.verifies.length = 0;
    // The runtime answers at most so many checks in flight (mesh-verify.ts): one past it is dropped.
    for (const id of ["b", "c", "d"])
      h.msg("e", { type: "gossip", updates: [{ id, status: "alive", incarnation: 5_000 }] });
    expect(h.verifies).toEqual(["b", "c"]);
    h.verified("b", true);
    expect(h.verifies).toEqual(["b", "c", "d"]);
    h.verified("c", true);
    h.verified("d", false);
    expect(h.swim.status("d")).toBe("dead");
    expect(h.swim.liveMembers()).toEqual(expect.arrayContaining(["b", "c", "e"]));
  });
});

describe("a live member's new life first heard of in a suspicion of it", () => {
  test("is checked: the refutation that follows is no way around the check", () => {
    const h = harness();
    h.admit("b");
    h.admit("c");
    h.verifies.length = 0;
    // b restarted (life 5,000); c suspects that life before its alive news reaches us.
    h.msg("c", { type: "gossip", updates: [{ id: "b", status: "suspect", incarnation: 5_000, from: "c" }] });
    h.msg("b", { type: "gossip", updates: [{ id: "b", status: "alive", incarnation: 5_001 }] });
    expect(h.verifies).toEqual(["b"]);
    h.verified("b", false);
    expect(h.swim.status("b")).toBe("dead");
  });
});

describe("a dead member whose check of its return failed (its address not up yet, say)", () => {
  test("is back after one passing re-check, even one its ping (no incarnation) asks for", () => {
    const h = harness();
    h.admit("b");
    h.admit("c");
    h.msg("c", { type: "gossip", updates: [{ id: "b", status: "dead", incarnation: 0, from: "c" }] });
    h.verifies.length = 0;
    // b restarted (life 5,000) and says so; our check of it gets no answer yet.
    h.msg("b", { type: "ping", seq: 1, updates: [{ id: "b", status: "alive", incarnation: 5_000 }] });
    h.verified("b", false);
    expect(h.swim.status("b")).toBe("dead");
    // Its backoff over, its next ping asks again; the check passes: b is back, at the life it told.
    h.at(resolveSwimConfig({}).recheckFirstMs + 1);
    h.msg("b", { type: "ping", seq: 2, updates: [] });
    h.verified("b", true);
    expect(h.verifies).toEqual(["b", "b"]);
    expect(h.swim.status("b")).toBe("alive");
    expect(h.incarnationOf("b")).toBe(5_000);
  });
});
