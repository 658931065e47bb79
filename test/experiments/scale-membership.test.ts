import { describe, expect, it } from "vitest";
import { runMembershipCell } from "../../src/experiments/scale/membership.js";

describe("scale: SWIM alone, formation apart from the steady state", () => {
  it("steady-state traffic per node does not grow with N; formation and push-pull do", () => {
    const small = runMembershipCell(16, 0, 5);
    const big = runMembershipCell(64, 0, 5);
    for (const c of [small, big]) {
      expect(c.formationMs).toBeGreaterThan(0);
      expect(c.formationMs).toBeLessThan(c.crashedAtMs - 10_000);
      expect(c.steadyBytesPerNodeS).toBeGreaterThan(0);
      expect(c.declaredDead).toBe(c.observers);
    }
    // Probes and acks only: one ping and its ack per node per second, whatever N.
    const ratio = big.steadyBytesPerNodeS / small.steadyBytesPerNodeS;
    expect(ratio).toBeGreaterThan(1 / 1.5);
    expect(ratio).toBeLessThan(1.5);
    // Formation spreads every member's join to every member: it grows with N.
    expect(big.formationBytesPerNode).toBeGreaterThan(2 * small.formationBytesPerNode);
    expect(big.pushPullBytesPerNodeS).toBeGreaterThan(small.pushPullBytesPerNodeS);
  });
});
