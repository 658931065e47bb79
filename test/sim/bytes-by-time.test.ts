/** Gossip bytes by send time: every gossip byte lands in one bucket, membership apart, nothing else. */
import { describe, expect, it } from "vitest";
import {
  addBytesAt,
  bytesBetween,
  isGossipKind,
  isMembershipKind,
  newBytesByTime,
} from "../../src/sim/bytes-by-time.js";
import { runSimulation } from "../../src/sim/run.js";
import { syntheticMmlu } from "../../src/workload/synthetic.js";
import { daemonSimConfig } from "./helpers.js";

describe("bytes by time", () => {
  it("buckets gossip by send time, membership apart, and ignores forwards and answers", () => {
    const b = newBytesByTime(100);
    addBytesAt(b, 50, "swim-ping", 10);
    addBytesAt(b, 250, "gossip-digest", 7);
    addBytesAt(b, 260, "forward", 1000);
    expect(b.gossip).toEqual([10, 0, 7]);
    expect(b.membership).toEqual([10, 0, 0]);
    expect(bytesBetween(b, 100, 300)).toEqual({ gossip: 7, membership: 0 });
    expect(bytesBetween(b, 0, 300)).toEqual({ gossip: 17, membership: 10 });
  });

  it("a run's buckets add up to its gossip and membership message bytes; mesh parts come by time", () => {
    const r = runSimulation(
      { ...daemonSimConfig(3, 6), meshParts: true },
      syntheticMmlu({ seed: 3, requests: 120, openLoopRate: 20 }),
    );
    const t = r.totals;
    const sum = (xs: number[]) => xs.reduce((a, x) => a + x, 0);
    const of = (pick: (k: string) => boolean) =>
      sum(Object.entries(t.messages).flatMap(([k, m]) => (pick(k) ? [m.bytes] : [])));
    expect(of(isGossipKind)).toBeGreaterThan(0);
    expect(sum(t.bytesByTime.gossip)).toBe(of(isGossipKind));
    expect(sum(t.bytesByTime.membership)).toBe(of(isMembershipKind));
    // Mesh parts come by delivery time, one bucket per BYTES_BUCKET_MS; the totals are their sum.
    expect((t.meshPartsByTime ?? []).length).toBeGreaterThan(1);
    expect(Object.keys(t.meshParts ?? {})).toContain("swim-ping");
  });
});
