/** `prefixmesh bench --compare-policies`: the ratio lines printed after the three runs. */
import { describe, expect, it } from "vitest";
import type { ReplaySummary } from "../../src/bench/replay.js";
import { formatRatios, summaryLines } from "../../src/bench/replay-run.js";

/** Latencies as [mean, p50, p99], independent so that each ratio column differs from the others. */
const summary = (
  [meanMs, p50Ms, p99Ms]: [number, number, number],
  cachedShare: number,
  hotspotShare: number,
): ReplaySummary => ({
  requests: 10,
  ok: 10,
  failed: 0,
  tooLong: 0,
  wallSec: 1,
  meanMs,
  p50Ms,
  p99Ms,
  cachedShare,
  hotspotShare,
  forwardedShare: 0,
  perNode: {},
  errors: {},
  meanTimingMs: undefined,
  fallbacks: 0,
});

describe("bench --compare-policies ratios", () => {
  it("prints affinity's and cost-aware's latency ratios to local, with cached and hotspot shares", () => {
    const out = formatRatios(
      {
        local: summary([400, 200, 1_000], 0.49, 0.25),
        affinity: summary([328, 180, 700], 0.6, 0.587),
        "cost-aware": summary([284, 150, 1_200], 0.65, 0.333),
      },
      "every run starts from empty caches",
    );
    const lines = out.trimEnd().split("\n");
    expect(lines).toHaveLength(4);
    expect(lines[1]).toMatch(/^ {2}affinity \/ local +mean 0\.820 {2}p50 0\.900 {2}p99 0\.700 /);
    expect(lines[1]).toContain("cached share 60.0% vs 49.0%  hotspot 58.7% vs 25.0%");
    expect(lines[2]).toMatch(/^ {2}cost-aware \/ local mean 0\.710 {2}p50 0\.750 {2}p99 1\.200 /);
    expect(lines[2]).toContain("cached share 65.0% vs 49.0%  hotspot 33.3% vs 25.0%");
    expect(lines[3]).toBe("  (every run starts from empty caches)");
  });

  it("skips a policy that did not run and never divides by a zero baseline", () => {
    const out = formatRatios(
      { local: summary([0, 0, 0], 0, 0.25), affinity: summary([10, 5, 40], 0.5, 0.5) },
      "x",
    );
    expect(out).toContain("affinity / local");
    expect(out).not.toContain("cost-aware");
    expect(out).toContain("mean n/a  p50 n/a  p99 n/a");
    expect(formatRatios({ affinity: summary([10, 5, 40], 0.5, 0.5) }, "x")).toBe("");
  });
});

describe("bench summary lines", () => {
  it("say where the time went, and count requests too long for the model apart from errors", () => {
    const s = {
      ...summary([10, 9, 20], 0.5, 0.5),
      ok: 8,
      failed: 1,
      tooLong: 1,
      errors: { "502 all routes failed": 1 },
      meanTimingMs: { queue: 1.25, prefill: 6, decode: 0.5, network: 2.25 },
      fallbacks: 3,
    };
    const lines = summaryLines("result", s);
    expect(lines[0]).toBe("result: 8/10 ok in 1.0 s");
    expect(lines).toContain(
      "  where the time went (mean, as the entry nodes report it): queue 1.3 ms  prefill 6.0 ms  decode 0.5 ms  network 2.3 ms; failed attempts 3",
    );
    expect(lines.some((l) => l.startsWith("  1 requests did not fit the model's context"))).toBe(true);
    expect(lines.at(-1)).toBe("  error ×1: 502 all routes failed");
    // A node that reports no breakdown: no such line.
    expect(
      summaryLines("result", { ...s, meanTimingMs: undefined }).some((l) => l.includes("where the time")),
    ).toBe(false);
  });
});
