/**
 * Issue 18/14: the simulators answer `verify-member` as the daemon does (sim/hello-tries.ts). A crashed
 * member answers no hello, so a credentialed member's forged word that it lives again starts checks
 * that end "unreachable" after the daemon's retries: no member admits it. A frozen member's check is
 * answered once it resumes, within the retries.
 */
import { describe, expect, test } from "vitest";
import { runMembership } from "../../src/sim/membership-sim.js";
import { runProblems, runWatchingAdmissions } from "./helpers.js";

const N = 8;
const base = { commMs: 2, jitterMs: 0.5, nodes: N };
const CRASH_MS = 10_000;
const FORGED_MS = 60_000;
/** The daemon's tries of a silent address: about 46 s of backoff (core/node/swim/verify-retry.ts). */
const RETRIES_MS = 50_000;

describe("a check of a member that is down (membership simulator)", () => {
  for (const seed of [1, 2])
    test(`a crashed member's forged revival is admitted by none (seed ${seed})`, () => {
      const r = runMembership({
        ...base,
        seed,
        durationMs: FORGED_MS + RETRIES_MS + 10_000,
        crashes: [{ node: 5, atMs: CRASH_MS }],
        forgeries: [
          { node: 0, atMs: FORGED_MS, update: { id: "n5", status: "alive", incarnation: 1_000, from: "n0" } },
        ],
      });
      const about5 = r.trace.filter((t) => t.id === "n5" && t.at > CRASH_MS);
      // Dead everywhere before the forgery, so the forged news is a revival each member checks.
      const dead = about5.filter((t) => t.to === "dead" && t.at < FORGED_MS);
      expect(new Set(dead.map((t) => t.observer)).size).toBe(N - 1);
      expect(r.verifyChecks).toBeGreaterThanOrEqual(N - 2);
      expect(about5.filter((t) => t.at >= FORGED_MS && t.to === "alive")).toEqual([]);
      for (const s of r.members) if (s) expect(s.liveMembers(), s.selfId).not.toContain("n5");
      // Each check ended (answered no after its tries), none left waiting for an answer.
      const refused = r.members.filter((s) => s?.refusedMembers(r.virtualMs).some((x) => x.id === "n5"));
      expect(refused.length).toBeGreaterThanOrEqual(N - 2);
      for (const s of r.members) if (s) expect(s.pendingMembers(), s.selfId).toBe(0);
    });
});

describe("a check of a node that is down (full simulator, SWIM)", () => {
  const NODES = 6;
  for (const seed of [1, 2])
    test(`a node crashed as it joined is admitted by none (seed ${seed})`, () => {
      // n3's join reaches the seeds, but it crashes for good before any check of it can be answered.
      const { r, w, admitted, seen, last } = runWatchingAdmissions(
        seed,
        NODES,
        60,
        { crashes: [{ node: 3, atMs: 1 }] },
        (_i, live) => live.some((m) => m.id === "n3"),
      );
      expect(runProblems(r, w.requests.length)).toBeUndefined();
      expect(seen).toBeGreaterThan(100);
      expect(admitted).toBe(0);
      // The others joined one another.
      for (const [i, n] of last.entries())
        if (i !== 3)
          expect((n?.meshMembers() ?? []).filter((m) => m.status === "alive").length).toBe(NODES - 2);
    }, 120_000);
});
