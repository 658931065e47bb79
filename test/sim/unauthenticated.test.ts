/**
 * Issue 14, "only authenticated members join", in the simulators, fixed seeds: a node without the
 * cluster's credential runs the protocol (pings, joins through the seeds, is named by whoever hears
 * it) yet no member ever admits it, and members' forged word that it is alive, at any incarnation,
 * only starts checks that fail. The full simulator answers every check of it no (faults.node
 * `unauthenticated`); the membership simulator, every check of an impostor.
 */
import { describe, expect, it } from "vitest";
import { runMembership } from "../../src/sim/membership-sim.js";
import { runProblems, runWatchingAdmissions } from "./helpers.js";

const NODES = 6;
const OUTSIDER = NODES - 1;

describe("a node configured without the cluster's credential (full simulator, SWIM)", () => {
  for (const seed of [1, 2])
    it(`seed ${seed}: is never a member anywhere; the others all are`, () => {
      const outsider = `n${OUTSIDER}`;
      const { r, w, admitted, seen, last } = runWatchingAdmissions(
        seed,
        NODES,
        120,
        { unauthenticated: [OUTSIDER] },
        (i, live) => (i === OUTSIDER ? live.length > 0 : live.some((m) => m.id === outsider)),
      );
      expect(runProblems(r, w.requests.length)).toBeUndefined();
      expect(seen).toBeGreaterThan(100);
      expect(admitted).toBe(0);
      // The others joined one another, and refused the outsider they heard from.
      for (const [i, n] of last.entries()) {
        if (i === OUTSIDER) continue;
        const views = n?.meshMembers() ?? [];
        expect(views.filter((m) => m.status === "alive").length).toBe(NODES - 2);
      }
      const refusing = last.filter(
        (n, i) => i !== OUTSIDER && n?.meshRefused()?.some((x) => x.id === `n${OUTSIDER}`),
      );
      expect(refusing.length).toBeGreaterThan(0);
    }, 120_000);
});

describe("an impostor members forge news of (membership simulator)", () => {
  it("is never admitted, whatever incarnation a member's relay says it is alive at", () => {
    const forged = (node: number, atMs: number, incarnation: number) => ({
      node,
      atMs,
      update: { id: "imp0", status: "alive" as const, incarnation },
    });
    for (const seed of [1, 2]) {
      const r = runMembership({
        nodes: 12,
        seed,
        commMs: 2,
        jitterMs: 0.5,
        durationMs: 120_000,
        seeds: [0, 1],
        impostors: 1,
        // Again and again, each at a higher incarnation than the last (evidence of a new life).
        forgeries: Array.from({ length: 10 }, (_, k) => forged(k % 12, 5_000 + k * 10_000, 1_000 + k)),
      });
      expect(r.trace.filter((t) => t.id === "imp0")).toEqual([]);
      for (const s of r.members) expect(s?.liveMembers().includes("imp0")).toBe(false);
      // Each forgery started checks (they failed): the relays' word was heard, never taken.
      const refused = r.members.reduce((a, s) => a + (s?.stats.refusedMembers ?? 0), 0);
      expect(refused).toBeGreaterThanOrEqual(11);
      for (const s of r.members) expect(s?.liveMembers().length).toBe(11);
    }
  });
});
