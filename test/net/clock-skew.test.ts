import { describe, expect, it } from "vitest";
import { clockSkewOf, describeSkew } from "../../src/net/clock-skew.js";

const NOW = Date.UTC(2026, 11, 6, 1, 0, 0);
const json = (v: unknown) => Buffer.from(JSON.stringify(v));

describe("a 401 refusing our timestamp names the clock skew", () => {
  it("from the body's clockMs, to the ms, ours minus the peer's", () => {
    const body = json({ error: "peer authentication failed: stale (…)", clockMs: NOW + 45_250 });
    expect(clockSkewOf(401, {}, body, NOW)).toBe(-45_250);
    expect(clockSkewOf(401, {}, json({ error: "x", clockMs: NOW - 90_000 }), NOW)).toBe(90_000);
    // Clocks 2 s apart: the request itself came late past the window, no clock is to blame.
    expect(clockSkewOf(401, {}, json({ error: "x", clockMs: NOW - 2_000 }), NOW)).toBeUndefined();
  });

  it("from a peer that sends no clockMs, by its Date header, only past the window", () => {
    const date = (ms: number) => ({ date: new Date(ms).toUTCString() });
    const body = json({ error: "peer authentication failed: stale" });
    expect(clockSkewOf(401, date(NOW - 120_000), body, NOW)).toBe(120_000);
    // Within the window the 401 has another cause (another secret, a replay): no skew named.
    expect(clockSkewOf(401, date(NOW - 5_000), body, NOW)).toBeUndefined();
    expect(clockSkewOf(401, { date: "not a date" }, body, NOW)).toBeUndefined();
  });

  it("not from another status, nor a nonsense clock, nor a body too large to be a refusal", () => {
    expect(clockSkewOf(403, {}, json({ clockMs: NOW - 60_000 }), NOW)).toBeUndefined();
    expect(clockSkewOf(200, {}, json({ clockMs: NOW - 60_000 }), NOW)).toBeUndefined();
    expect(clockSkewOf(401, {}, json({ clockMs: 1 }), NOW)).toBeUndefined(); // decades: no skew
    expect(clockSkewOf(401, {}, json({ clockMs: "soon" }), NOW)).toBeUndefined();
    expect(clockSkewOf(401, {}, Buffer.from("not json"), NOW)).toBeUndefined();
    const big = json({ clockMs: NOW - 60_000, pad: "x".repeat(5_000) });
    expect(clockSkewOf(401, {}, big, NOW)).toBeUndefined();
  });

  it("describes the skew for an operator", () => {
    expect(describeSkew(-45_250)).toBe("45 s behind");
    expect(describeSkew(-119_990)).toBe("2 min behind"); // rounded before the unit is picked
    expect(describeSkew(600_000)).toBe("10 min ahead of");
    expect(describeSkew(3 * 3_600_000)).toBe("3 h ahead of");
  });
});
