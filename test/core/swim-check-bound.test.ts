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
