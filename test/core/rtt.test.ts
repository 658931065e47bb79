import { describe, expect, it } from "vitest";
import { smoothRtt } from "../../src/core/node/targets.js";

describe("RTT estimate", () => {
  it("forgets a high first sample within a few rounds but rises only slowly on a spike", () => {
    let rtt = smoothRtt(undefined, 80); // connection set-up
    for (let i = 0; i < 5; i++) rtt = smoothRtt(rtt, 4);
    expect(rtt).toBeLessThan(7); // 4 + 76 / 2^5
    rtt = smoothRtt(rtt, 84); // one spike
    expect(rtt).toBeLessThan(17); // + 80 / 8
    const beforeOddity = rtt;
    rtt = smoothRtt(rtt, -3); // clock oddities count as 0 ms: never negative, and no lower than 0 would go
    expect(rtt).toBeGreaterThanOrEqual(0);
    expect(rtt).toBeCloseTo(beforeOddity / 2, 9); // falling: half way to 0, not to -3
  });

  it("takes a negative first sample as 0, never a negative estimate", () => {
    let rtt = smoothRtt(undefined, -3);
    expect(rtt).toBe(0);
    rtt = smoothRtt(rtt, -1); // and stays there
    expect(rtt).toBe(0);
  });
});
