/**
 * A member that sends full snapshots at the key cap (2^21 keys, 12.6 MB) to a real node process: the
 * node keeps answering `/health` while it decodes them (on a worker thread) and applies them in steps,
 * and ends holding the last one whole. The member is `SnapshotFloodPeerDouble`, a test double.
 * Bounds are generous (a busy 2-core machine); the measured figures are in BENCHMARKS.md.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CAP_KEYS, estimateOf, measureStall, startVictim } from "../../src/bench/snapshot-stall.js";
import { requireBuild } from "./helpers.js";

describe("snapshots at the key cap from a member", () => {
  let node: Awaited<ReturnType<typeof startVictim>>;
  beforeAll(async () => {
    node = await startVictim(requireBuild());
  }, 60_000);
  afterAll(async () => {
    await node?.stop();
  });

  it("keep /health answering while they are applied, and end applied whole", async () => {
    const r = await measureStall(node, 2);
    console.log(
      `oversized snapshots: /health p50 ${r.health.p50.toFixed(1)} ms, p99 ${r.health.p99.toFixed(1)} ms, ` +
        `max ${r.health.max.toFixed(1)} ms (n ${r.health.n}); ${r.frames} frames applied in ${r.applyMs.toFixed(0)} ms`,
    );
    expect(r.frameBytes).toBeGreaterThan(12_000_000);
    // Applied on the event loop in one piece, each took about a second: /health p50 ≈ 90 ms, p99 ≈ 2 s.
    expect(r.health.p50).toBeLessThan(50);
    expect(r.health.p99).toBeLessThan(500);
    const est = await estimateOf(node.apiUrl, "B");
    expect(est.version).toBe(2);
    expect(est.tokens).toBe(CAP_KEYS * 16);
    const health = await fetch(`${node.apiUrl}/health`);
    expect(health.ok).toBe(true);
  }, 180_000);
});
