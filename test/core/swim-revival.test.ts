/** SWIM's check of a member back from dead or left (swim/swim.ts), as a first admission is checked. */
import { describe, expect, test } from "vitest";
import { resolveSwimConfig } from "../../src/core/node/swim/config.js";
import { harness } from "./swim-harness.js";

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
