import { describe, expect, it } from "vitest";
import { Membership } from "../../src/core/node/membership.js";

describe("RTT estimate", () => {
  it("forgets a high first sample within a few rounds but rises only slowly on a spike", () => {
    const m = new Membership(["B"], 1_500, 0);
    const p = m.get("B");
    if (!p) throw new Error("no peer state");
    m.sampleRtt(p, 80); // connection set-up
    for (let i = 0; i < 5; i++) m.sampleRtt(p, 4);
    expect(p.rttMs).toBeLessThan(7); // 4 + 76 / 2^5
    m.sampleRtt(p, 84); // one spike
    expect(p.rttMs).toBeLessThan(17); // + 80 / 8
    const beforeOddity = p.rttMs as number;
    m.sampleRtt(p, -3); // clock oddities count as 0 ms: never negative, and no lower than 0 would go
    expect(p.rttMs).toBeGreaterThanOrEqual(0);
    expect(p.rttMs).toBeCloseTo(beforeOddity / 2, 9); // falling: half way to 0, not to -3
  });

  it("takes a negative first sample as 0, never a negative estimate", () => {
    const m = new Membership(["B"], 1_500, 0);
    const p = m.get("B");
    if (!p) throw new Error("no peer state");
    expect(p.rttMs).toBeUndefined();
    m.sampleRtt(p, -3);
    expect(p.rttMs).toBe(0);
    m.sampleRtt(p, -1); // and stays there
    expect(p.rttMs).toBe(0);
  });
});
