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
    // Counts that only grow are a counter, so rate() and increase() work on them.
    expect(first).toContain("# TYPE prefixmesh_forward_events counter");

    // The next scrape sees the node as it is then, not the previous scrape's view.
    tree = 11;
    const second = await m.registry.metrics();
    expect(builds).toBe(2);
    expect(second).toContain('prefixmesh_tree_tokens{node="A"} 11');
  });
});

describe("metrics: types and the process's own", () => {
  it("expose process_* and nodejs_* metrics, labelled with the node", async () => {
    const text = await createMetrics("P").registry.metrics();
    expect(text).toMatch(/^process_cpu_seconds_total\{node="P"\} /m);
    expect(text).toMatch(/^process_resident_memory_bytes\{node="P"\} /m);
    expect(text).toMatch(/^nodejs_eventloop_lag_seconds\{node="P"\} /m);
    expect(text).toMatch(/^nodejs_heap_size_used_bytes\{node="P"\} /m);
    expect(await createMetrics("Q", { processMetrics: false }).registry.metrics()).not.toContain("process_");
  });

  it("declare every prefixmesh_* metric whose value only grows as a counter, and durations as histograms", async () => {
    const m = createMetrics("A", { processMetrics: false });
    m.setViewProvider(() => ({ treeTokens: 0, queueDepth: 0, pushBackActive: false, peers: [] }));
    const metrics = await m.registry.getMetricsAsJSON();
    for (const x of metrics) {
      if (x.name.endsWith("_total")) expect(x.type, x.name).toBe("counter");
      if (x.name.endsWith("_seconds") && !x.name.includes("age")) expect(x.type, x.name).toBe("histogram");
    }
    m.phases.observe({ phase: "queue" }, 0.002);
    expect(await m.registry.metrics()).toMatch(
      /^prefixmesh_request_phase_seconds_count\{[^}]*phase="queue"[^}]*\} 1$/m,
    );
  });
});

describe("metrics: help texts say what is counted", () => {
  it("prefixmesh_gossip_bytes_total counts all gossip, not only snapshots", async () => {
    // peer-traffic.ts and peer-sender.ts count snapshots; mesh-peers.ts counts SWIM and Scuttlebutt messages.
    const metrics = await createMetrics("A", { processMetrics: false }).registry.getMetricsAsJSON();
    const help = metrics.find((m) => m.name === "prefixmesh_gossip_bytes_total")?.help ?? "";
    expect(help).toMatch(/snapshots/);
    expect(help).toMatch(/SWIM/);
    expect(help).toMatch(/Scuttlebutt/);
    expect(help).not.toMatch(/^Anti-entropy snapshot bytes/);
  });
});
