import { describe, expect, it } from "vitest";
import { smoothRareRtt, smoothRtt, Targets } from "../../src/core/node/targets.js";

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

  it("rare samples (SWIM probes): a lower one replaces the estimate, one slow probe moves nothing", () => {
    let rtt = smoothRareRtt(undefined, 130); // the first probe sets up its connections
    rtt = smoothRareRtt(rtt, 5, 130);
    expect(rtt).toBe(5);
    expect(smoothRareRtt(rtt, 430, 5)).toBe(5); // one busy ack
    expect(smoothRareRtt(rtt, 45, 85)).toBe(10); // two slow ones in a row: up by 1/8 of the lower
    expect(smoothRareRtt(rtt, -2, 5)).toBe(0);
    const t = new Targets();
    t.reset(["a"]);
    for (const ms of [130, 5, 430]) t.sampleRtt("a", ms, true);
    expect(t.rttMs("a")).toBe(5);
    t.sampleRtt("a", 85, true); // the second high one in a row: min(85, 430) → 5 + 80 / 8
    expect(t.rttMs("a")).toBe(15);
  });

  it("takes a negative first sample as 0, never a negative estimate", () => {
    let rtt = smoothRtt(undefined, -3);
    expect(rtt).toBe(0);
    rtt = smoothRtt(rtt, -1); // and stays there
    expect(rtt).toBe(0);
  });
});

describe("typical RTT of the measured peers", () => {
  it("is the median of the measured peers, and follows samples and removals", () => {
    const t = new Targets();
    t.reset(["a", "b", "c", "d"]);
    expect(t.typicalRttMs()).toBeUndefined();
    t.sampleRtt("a", 10);
    expect(t.typicalRttMs()).toBe(10);
    t.sampleRtt("b", 2);
    t.sampleRtt("c", 4);
    expect(t.typicalRttMs()).toBe(4); // d, unmeasured, does not count
    t.sampleRtt("d", 100);
    expect(t.typicalRttMs()).toBe(7); // (4 + 10) / 2
    t.remove("d");
    expect(t.typicalRttMs()).toBe(4);
    t.sampleRtt("c", 0); // falls half way: 2
    expect(t.typicalRttMs()).toBe(2);
    t.sampleRtt("gone", 1); // not a target: ignored
    expect(t.typicalRttMs()).toBe(2);
    t.reset(["a"]);
    expect(t.typicalRttMs()).toBeUndefined();
  });
});
