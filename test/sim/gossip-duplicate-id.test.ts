/**
 * Two live processes with one id (a copied config) in a scuttlebutt cluster (swim/self-news.ts): each
 * outbids the other's alive records a bounded few times, then only counts them (`duplicateId`), so the
 * members' `verify-member` checks (a hello fetch each, in a daemon) stay a small constant, not a storm
 * growing with time.
 */
import { describe, expect, test } from "vitest";
import { runMembership } from "../../src/sim/membership-sim.js";

const T = Date.UTC(2026, 0, 1);

const run = (countFromMs: number, durationMs: number) =>
  runMembership({
    nodes: 16,
    seed: 3,
    commMs: 2,
    jitterMs: 0.5,
    durationMs,
    countFromMs,
    // n5 runs twice: the copy starts 2 s in, its clock a second behind (its boot below n5's).
    clockOffsetMs: Object.fromEntries(Array.from({ length: 16 }, (_, i) => [i, T])),
    twins: [{ node: 5, atMs: 2_000, clockOffsetMs: T - 1_000 }],
  });

describe("one id run by two live processes", () => {
  test("costs a bounded few checks, none after it settles, and both processes count it", () => {
    const whole = run(0, 60_000);
    const late = run(20_000, 60_000);
    // Formation's admissions (16 members × 15) plus a few rises of n5 checked by each peer (two outbids
    // each process at most, self-news.ts), however long it runs.
    expect(whole.verifyChecks).toBeLessThanOrEqual(16 * 15 + 6 * 15);
    expect(late.verifyChecks).toBe(0);
    const [twin] = whole.twins;
    const n5 = whole.members[5];
    expect((twin?.stats.duplicateId ?? 0) + (n5?.stats.duplicateId ?? 0)).toBeGreaterThan(0);
    // Neither process is put out: every other member holds n5 live.
    for (const [i, m] of whole.members.entries())
      if (i !== 5) expect(m?.status("n5")).toMatch(/alive|suspect/);
  });

  test("a restart booted one above its old life is still checked by every member (its join tells it)", () => {
    // n5 crashes and comes back at once, its clock set back to one above its old life's incarnation:
    // a refutation to the members, unchecked, until its seed's answer shows it the old record.
    const r = runMembership({
      nodes: 16,
      seed: 3,
      commMs: 2,
      jitterMs: 0.5,
      durationMs: 30_000,
      countFromMs: 9_000,
      clockOffsetMs: Object.fromEntries(Array.from({ length: 16 }, (_, i) => [i, T])),
      crashes: [{ node: 5, atMs: 9_000 }],
      twins: [{ node: 5, atMs: 9_500, clockOffsetMs: T + 1 }],
    });
    const [restart] = r.twins;
    expect(restart?.currentIncarnation).toBe(T + 3);
    // Each of the 15 checks it once, and once more: the simulator's hello says no incarnation, so a
    // new life passed with no word is asked again after recheckAfterChangeMs (admissions.ts).
    expect(r.verifyChecks).toBe(2 * 15);
    for (const [i, m] of r.members.entries())
      if (i !== 5) expect(m?.memberViews().find((x) => x.id === "n5")?.incarnation).toBe(T + 3);
  });
});
