/**
 * `/cluster`'s own row shows the depth peers are told (a held engine counts, as in each peer's row),
 * and the simulator's oracle pushes that depth as its perfect estimate.
 */
import { describe, expect, it } from "vitest";
import { stateOf } from "../../src/sim/oracle.js";
import { Harness, prompt } from "../core/node-harness.js";
import { harnessClusterView } from "./helpers.js";

const view = (h: Harness, id: string) => harnessClusterView(h, id, 100_000);

describe("a held node's own depth as operators and the oracle see it", () => {
  it("is the depth it reports, with its jobs beside it", () => {
    const h = new Harness(["A", "B"], { offload: true }, 100_000);
    h.warm("A", "w", prompt(1, 1), 100);
    h.client("A", "long", prompt(3, 1), 30_000);
    h.advanceLive(5_000);
    const a = h.node("A");
    const row = view(h, "A").cluster(0);
    expect(row.queuedJobs).toBe(1);
    expect(row.queueDepth).toBe(a.reportedDepth());
    expect(row.queueDepth).toBeGreaterThan(40);
    // B's row of A tells the same story (the snapshots it took carry the reported depth).
    expect(
      view(h, "B")
        .cluster(0)
        .peers.find((p) => p.id === "A")?.queueDepth,
    ).toBeGreaterThan(40);
    expect(stateOf(a).queueDepth).toBe(row.queueDepth);
  });
});
