/**
 * A member declared dead that comes back (swim/admissions.ts, the revival path), in the membership
 * simulator: frozen past its suspicion, every other member declares it dead; resumed, it refutes its
 * death, and each member admits it again only through a check of its own, then re-checks it once
 * (the simulator's authority says no incarnation, as a hello not settled yet would not).
 */
import { describe, expect, test } from "vitest";
import { resolveSwimConfig } from "../../src/core/node/swim/config.js";
import { runMembership } from "../../src/sim/membership-sim.js";

const N = 16;
const RECHECK_MS = resolveSwimConfig().recheckAfterChangeMs;
const RESUME_MS = 80_000;

describe("a member declared dead, back", () => {
  for (const seed of [1, 2])
    test(`is alive again at its own incarnation everywhere, each re-checking it once (seed ${seed})`, () => {
      const r = runMembership({
        seed,
        commMs: 2,
        jitterMs: 0.5,
        nodes: N,
        durationMs: RESUME_MS + 2 * RECHECK_MS,
        countFromMs: RESUME_MS,
        pauses: [{ node: 5, atMs: 20_000, untilMs: RESUME_MS }],
      });
      const about5 = r.trace.filter((t) => t.id === "n5" && t.at > 1_000);
      const dead = about5.filter((t) => t.to === "dead" && t.at < RESUME_MS);
      expect(new Set(dead.map((t) => t.observer)).size).toBe(N - 1);
      const back = about5.filter((t) => t.to === "alive" && t.at >= RESUME_MS);
      expect(new Set(back.map((t) => t.observer)).size).toBe(N - 1);
      const own = r.members[5]?.currentIncarnation;
      for (const s of r.members) {
        expect(s?.liveMembers().length, s?.selfId).toBe(N - 1);
        if (s?.selfId === "n5") continue;
        expect(s?.memberViews().find((m) => m.id === "n5")?.incarnation, s?.selfId).toBe(own);
      }
      // One check of its revival and one re-check, by each other member: no more.
      expect(r.verifyChecks).toBe(2 * (N - 1));
    });
});
