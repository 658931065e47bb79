import { describe, expect, it } from "vitest";
import { createMetrics, type GaugeView } from "../../src/server/metrics.js";

describe("metrics: the cluster-view gauges", () => {
  it("build the view once per scrape and report what it says", async () => {
    const m = createMetrics("A");
    let builds = 0;
    let tree = 10;
    m.setViewProvider((): GaugeView => {
      builds++;
      return {
        treeTokens: tree,
        queueDepth: 2,
        pushBackActive: true,
        peers: [
          { peer: "B", suspected: false, estimateAgeSec: 1.5, estimateTokens: 7, pushBackActive: false },
          { peer: "C", suspected: true, estimateTokens: 0, pushBackActive: true },
        ],
        forwardEvents: { fallback: 3 },
      };
    });
    const first = await m.registry.metrics();
    expect(builds).toBe(1);
    expect(first).toContain('prefixmesh_tree_tokens{node="A"} 10');
    expect(first).toContain('prefixmesh_queue_depth{node="A"} 2');
    expect(first).toContain('prefixmesh_pushback_active{node="A"} 1');
    expect(first).toContain('prefixmesh_peer_suspected{peer="C",node="A"} 1');
    expect(first).toContain('prefixmesh_peer_estimate_age_seconds{peer="B",node="A"} 1.5');
    // A peer without an estimate is left out of the age gauge rather than reported as 0.
    expect(first).not.toContain('prefixmesh_peer_estimate_age_seconds{peer="C"');
    expect(first).toContain('prefixmesh_forward_events{event="fallback",node="A"} 3');

    // The next scrape sees the node as it is then, not the previous scrape's view.
    tree = 11;
    const second = await m.registry.metrics();
    expect(builds).toBe(2);
    expect(second).toContain('prefixmesh_tree_tokens{node="A"} 11');
  });
});
