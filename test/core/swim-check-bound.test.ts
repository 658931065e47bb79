/**
 * SWIM's checks in flight against the runtime's bound (swim/config.ts MAX_VERIFICATIONS, which
 * mesh-verify.ts answers "busy" past): candidates and live members' new lives each keep up to
 * `maxCandidates` checks in flight, so `maxCandidates` is bounded for both to fit, and a setting past
 * that is refused with a clear error rather than turning legitimate checks into refusals.
 */
import { describe, expect, test } from "vitest";
import { MAX_CANDIDATES, MAX_VERIFICATIONS, resolveSwimConfig } from "../../src/core/node/swim/config.js";
import { Swim } from "../../src/core/node/swim/swim.js";
import type { SwimEffect } from "../../src/core/node/swim/types.js";

describe("maxCandidates against the runtime's verifications in flight", () => {
  test("past its bound is refused, naming the setting and why", () => {
    expect(() => resolveSwimConfig({ maxCandidates: MAX_CANDIDATES + 1 })).toThrow(
      new RegExp(`maxCandidates: must be at most ${MAX_CANDIDATES}: .*${MAX_VERIFICATIONS}`),
    );
    expect(() => resolveSwimConfig({ maxCandidates: 100_000 })).toThrow(/maxCandidates/);
    expect(resolveSwimConfig({ maxCandidates: MAX_CANDIDATES }).maxCandidates).toBe(MAX_CANDIDATES);
  });

  test("at its bound, candidates and new lives all at once stay within the runtime's bound", () => {
    const swim = new Swim("a", [], { now: () => 0, random: () => 0.5 }, { maxCandidates: MAX_CANDIDATES });
    const inFlight = new Set<string>();
    const run = (effects: SwimEffect[]) => {
      for (const e of effects) if (e.type === "verify-member") inFlight.add(e.id);
    };
    const gossip = (id: string, incarnation: number, from = "x") =>
      run(
        swim.handle({
          type: "message",
          from,
          msg: { type: "gossip", updates: [{ id, status: "alive", incarnation }] },
        }),
      );
    const members = Array.from({ length: 2 * MAX_CANDIDATES }, (_, i) => `m${i}`);
    for (const id of members) {
      gossip(id, 0);
      run(swim.handle({ type: "verified", id, ok: true }));
    }
    inFlight.clear();
    // Every other member restarted (a new life each, told by m0), and as many strangers named.
    for (const id of members.slice(1)) gossip(id, 5_000, "m0");
    for (let i = 0; i < 2 * MAX_CANDIDATES; i++) gossip(`s${i}`, 1, "m0");
    expect(inFlight.size).toBe(2 * MAX_CANDIDATES);
    expect(inFlight.size).toBeLessThanOrEqual(MAX_VERIFICATIONS);
  });
});

describe("checks the core has stopped waiting for, which the runtime still runs", () => {
  test("new lives of members that died meanwhile keep their slot until answered", () => {
    const swim = new Swim("a", [], { now: () => 0, random: () => 0.5 }, { maxCandidates: MAX_CANDIDATES });
    // The runtime's verifications in flight (mesh-verify.ts): one per id, until its answer is fed.
    const inFlight = new Set<string>();
    const checked: string[] = [];
    const run = (effects: SwimEffect[]) => {
      for (const e of effects)
        if (e.type === "verify-member") {
          inFlight.add(e.id);
          checked.push(e.id);
        }
    };
    const answer = (id: string, ok: boolean) => {
      inFlight.delete(id);
      run(swim.handle({ type: "verified", id, ok }));
    };
    const tell = (id: string, status: "alive" | "dead", incarnation: number, from = "m0") =>
      run(
        swim.handle({
          type: "message",
          from,
          msg: { type: "gossip", updates: [{ id, status, incarnation }] },
        }),
      );
    const members = Array.from({ length: 3 * MAX_CANDIDATES }, (_, i) => `m${i}`);
    for (const id of members) {
      tell(id, "alive", 0, "x");
      answer(id, true);
    }
    const first = members.slice(1, MAX_CANDIDATES + 1);
    const second = members.slice(MAX_CANDIDATES + 1, 2 * MAX_CANDIDATES + 1);
    // Restarts whose new address does not answer yet: their checks are retried by the runtime...
    for (const id of first) tell(id, "alive", 5_000);
    // ...while SWIM declares them dead (they answer no probe either).
    for (const id of first) tell(id, "dead", 5_000);
    // Then as many other restarts, and as many strangers named.
    for (const id of second) tell(id, "alive", 5_000);
    for (let i = 0; i < MAX_CANDIDATES; i++) tell(`s${i}`, "alive", 1);
    expect(inFlight.size).toBeLessThanOrEqual(MAX_VERIFICATIONS);
    // The runtime gives the dead ones up: the restarts waiting are checked then, none skipped.
    checked.length = 0;
    for (const id of first) answer(id, false);
    expect(checked.sort()).toEqual([...second].sort());
    expect(inFlight.size).toBeLessThanOrEqual(MAX_VERIFICATIONS);
    for (const id of first) expect(swim.status(id)).toBe("dead");
  });
});
