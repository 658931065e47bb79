/** The snapshot clock headers' format and parsers (src/net/snapshot-wire.ts). */
import { describe, expect, it } from "vitest";

describe("snapshot clock headers", () => {
  it("round-trips the echo and rejects malformed or oversized values", async () => {
    const { formatClock, formatEcho, parseEcho, parseClock } = await import("../../src/net/snapshot-wire.js");
    const echo = { t: 1795976827696.25, heldMs: 3.5 };
    expect(parseEcho(formatEcho(echo))).toEqual(echo);
    // Real clock readings have long fractions (performance.now) and may be tiny (exponent notation).
    const held = 0.1234567890123;
    expect(parseEcho(formatEcho({ t: 1795976827696.2534, heldMs: held }))?.heldMs).toBeCloseTo(held, 3);
    expect(parseClock(formatClock(1e-7))).toBe(0);
    expect(parseClock("12.5")).toBe(12.5);
    for (const bad of ["", "-1", "1e9", "NaN", "1:2", "x", "9".repeat(40)])
      expect(parseClock(bad)).toBeUndefined();
    for (const bad of ["1", "1:2:3", "a:b", "-1:2", `${"9".repeat(30)}:1`])
      expect(parseEcho(bad)).toBeUndefined();
    expect(parseEcho(["1:2"])).toBeUndefined();
  });
});
