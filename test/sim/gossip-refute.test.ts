/**
 * Refutations under message loss cost no checks (swim/admissions.ts `newLife`): a member that refutes
 * a suspicion rises by one, taken without a `verify-member` (a hello fetch, in a daemon) even by the
 * members that never heard the suspicion; before, most of them checked it, O(N) fetches a suspicion.
 */
import { describe, expect, test } from "vitest";
import { runMembership } from "../../src/sim/membership-sim.js";

const base = { commMs: 2, jitterMs: 0.5, durationMs: 120_000, countFromMs: 10_000 };

describe("false suspicions under message loss", () => {
  // Seeds picked for runs with refutations: with the default two probe attempts 5% loss alone
  // suspects no one, so one probe attempt at 5% loss, and two attempts at 20%.
  test.each([
    { nodes: 64, seed: 2, network: { lossProb: 0.05 }, swim: { probeAttempts: 1 } },
    { nodes: 16, seed: 2, network: { lossProb: 0.2 } },
  ])("are refuted with no verify-member check ($nodes nodes)", (c) => {
    const r = runMembership({ ...base, ...c });
    expect(r.members.reduce((a, m) => a + (m?.stats.refuted ?? 0), 0)).toBeGreaterThan(0);
    expect(r.verifyChecks).toBe(0);
    // Nobody was lost over it.
    for (const m of r.members) expect(m?.liveMembers().length).toBe(c.nodes - 1);
  });
});
