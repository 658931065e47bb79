/**
 * A `verify-member` check across a partition fails its tries as the daemon's hello would
 * (sim/hello-tries.ts): n5 runs but is cut off from the others, who declared it dead; a credentialed
 * member's forged word that it lives starts their checks of it. Still cut off when the daemon's retries
 * end, they answer no; healed within them, a later try is answered yes, not before the heal.
 */
import { describe, expect, test } from "vitest";
import { runMembership } from "../../src/sim/membership-sim.js";

const N = 8;
const base = { commMs: 2, jitterMs: 0.5, nodes: N };
const CUT_MS = 10_000;
const FORGED_MS = 60_000;
/**
 * The daemon's tries of a cut-off address (core/node/swim/verify-retry.ts): about 46 s of backoff, and
 * each try waits out its time (transport-timeouts.ts' messageTotalMs) as nothing comes back.
 */
const RETRIES_MS = 110_000;
const HEAL_SOON_MS = FORGED_MS + 5_000;
const others = [0, 1, 2, 3, 4, 6, 7];

function run(seed: number, healMs: number, durationMs: number) {
  return runMembership({
    ...base,
    seed,
    durationMs,
    network: { partitions: [{ startMs: CUT_MS, endMs: healMs, groups: [others, [5]] }] },
    forgeries: [
      { node: 0, atMs: FORGED_MS, update: { id: "n5", status: "alive", incarnation: 1_000, from: "n0" } },
    ],
  });
}

describe("a check across a partition (membership simulator)", () => {
  for (const seed of [1, 2]) {
    test(`still cut off when the retries end: answered no (seed ${seed})`, () => {
      const end = FORGED_MS + RETRIES_MS + 10_000;
      const r = run(seed, end + 10_000, end);
      const about5 = r.trace.filter((t) => t.id === "n5" && t.observer !== "n5");
      const dead = about5.filter((t) => t.to === "dead" && t.at < FORGED_MS);
      expect(new Set(dead.map((t) => t.observer)).size).toBe(N - 1);
      expect(r.verifyChecks).toBeGreaterThanOrEqual(N - 2);
      expect(about5.filter((t) => t.at >= FORGED_MS && t.to === "alive")).toEqual([]);
      const refused = r.members.filter((s) => s?.refusedMembers(r.virtualMs).some((x) => x.id === "n5"));
      expect(refused.length).toBeGreaterThanOrEqual(N - 2);
      for (const s of r.members) if (s && s.selfId !== "n5") expect(s.pendingMembers(), s.selfId).toBe(0);
    });

    test(`healed within the retries: answered yes after the heal (seed ${seed})`, () => {
      const r = run(seed, HEAL_SOON_MS, FORGED_MS + RETRIES_MS);
      const alive = r.trace.filter(
        (t) => t.id === "n5" && t.observer !== "n5" && t.at >= FORGED_MS && t.to === "alive",
      );
      expect(new Set(alive.map((t) => t.observer)).size).toBeGreaterThanOrEqual(N - 2);
      for (const t of alive) expect(t.at).toBeGreaterThanOrEqual(HEAL_SOON_MS);
      for (const s of r.members)
        if (s && s.selfId !== "n5")
          expect(s.refusedMembers(r.virtualMs).map((x) => x.id)).not.toContain("n5");
    });
  }
});
