import { describe, expect, it } from "vitest";
import { createMetrics, type GaugeView, refusalReason } from "../../src/server/metrics.js";

/** A peer of the view, not live unless said, with no estimate. */
const notLive = (peer: string, o: { suspected?: boolean; down?: boolean; left?: boolean } = {}) => ({
  peer,
  suspected: o.suspected ?? true,
  down: o.down ?? false,
  left: o.left ?? false,
  estimateTokens: 0,
  pushBackActive: false,
});

/** One scrape of node A's metrics with `peers` in its view and per-peer series bounded to 3. */
function scrapeBounded(peers: GaugeView["peers"]): Promise<string> {
  const m = createMetrics("A", { processMetrics: false, maxPeerSeries: 3 });
  m.setViewProvider(() => ({ treeTokens: 0, queueDepth: 0, pushBackActive: false, peers }));
  return m.registry.metrics();
}

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

describe("metrics: the KV-event mirror", () => {
  it("exist only for a node whose engine follows KV events, and read its status at each scrape", async () => {
    const view = (kvEvents?: GaugeView["kvEvents"]): GaugeView => ({
      treeTokens: 0,
      queueDepth: 0,
      pushBackActive: false,
      peers: [],
      ...(kvEvents ? { kvEvents } : {}),
    });
    const plain = createMetrics("A", { processMetrics: false });
    plain.setViewProvider(() => view());
    expect(await plain.registry.metrics()).not.toContain("prefixmesh_engine_kv_");

    const m = createMetrics("A", { processMetrics: false, kvEvents: true });
    let kv = {
      exact: true,
      blocks: 3,
      reachableBlocks: 2,
      subscriber: { gaps: 0, replayFailures: 0 },
      mirror: { stored: 3, forgotten: 0 },
    };
    m.setViewProvider(() => view(kv));
    const first = await m.registry.metrics();
    expect(first).toContain('prefixmesh_engine_kv_mirror_exact{node="A"} 1');
    expect(first).toContain('prefixmesh_engine_kv_mirror_blocks{node="A"} 3');
    expect(first).toContain('prefixmesh_engine_kv_mirror_reachable_blocks{node="A"} 2');
    expect(first).toContain(
      'prefixmesh_engine_kv_subscriber_events_total{event="replay_failures",node="A"} 0',
    );
    expect(first).toContain('prefixmesh_engine_kv_mirror_events_total{event="stored",node="A"} 3');

    kv = {
      ...kv,
      exact: false,
      blocks: 0,
      subscriber: { gaps: 1, replayFailures: 1 },
      mirror: { stored: 3, forgotten: 3 },
    };
    const second = await m.registry.metrics();
    expect(second).toContain('prefixmesh_engine_kv_mirror_exact{node="A"} 0');
    expect(second).toContain('prefixmesh_engine_kv_mirror_blocks{node="A"} 0');
    expect(second).toContain('prefixmesh_engine_kv_subscriber_events_total{event="gaps",node="A"} 1');
    expect(second).toContain('prefixmesh_engine_kv_mirror_events_total{event="forgotten",node="A"} 3');
  });
});

describe("metrics: refused members by reason", () => {
  it("labels a refusal by the check's code, anything else as other (bounded labels)", () => {
    expect(refusalReason("wrong-gossip: peer 'B' runs --gossip full, this node scuttlebutt")).toBe(
      "wrong-gossip",
    );
    expect(refusalReason("no-credential: 403")).toBe("no-credential");
    expect(refusalReason("this node has no peer authentication")).toBe("other");
    expect(refusalReason("wrong-clusterish: x")).toBe("other");
    expect(refusalReason("")).toBe("other");
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

describe("metrics: SWIM's membership events", () => {
  it("are read from the view at each scrape, and absent when the view has none (gossip full)", async () => {
    const m = createMetrics("A", { processMetrics: false });
    let events: Record<string, number> | undefined = { probe: 4, refuted: 0 };
    m.setViewProvider(() => ({
      treeTokens: 0,
      queueDepth: 0,
      pushBackActive: false,
      peers: [],
      ...(events ? { membershipEvents: events } : {}),
    }));
    const text = await m.registry.metrics();
    expect(text).toContain('prefixmesh_membership_events_total{event="probe",node="A"} 4');
    // A count still at 0 is a series, so rate() has a baseline before the first refutation.
    expect(text).toContain('prefixmesh_membership_events_total{event="refuted",node="A"} 0');
    events = { probe: 9, refuted: 1 };
    expect(await m.registry.metrics()).toContain(
      'prefixmesh_membership_events_total{event="probe",node="A"} 9',
    );
    events = undefined;
    expect(await m.registry.metrics()).not.toMatch(/^prefixmesh_membership_events_total\{/m);
    const help =
      (await m.registry.getMetricsAsJSON()).find((x) => x.name === "prefixmesh_membership_events_total")
        ?.help ?? "";
    expect(help).toMatch(/absent under --gossip full/);
  });
});

describe("metrics: per-peer series are bounded (--metrics-max-peers)", () => {
  it("counters label the first peers and count the rest as `other`, for good", async () => {
    const m = createMetrics("A", { processMetrics: false, maxPeerSeries: 2 });
    m.gossipBytes.inc({ peer: "B", direction: "out" }, 10);
    m.gossipBytes.inc({ peer: "C", direction: "in" }, 20);
    m.gossipBytes.inc({ peer: "D", direction: "out" }, 30);
    m.peerFailures.inc({ peer: "E", reason: "timeout" });
    m.gossipBytes.inc({ peer: "B", direction: "out" }, 1); // B keeps its own series
    const text = await m.registry.metrics();
    expect(text).toContain('prefixmesh_gossip_bytes_total{peer="B",direction="out",node="A"} 11');
    expect(text).toContain('prefixmesh_gossip_bytes_total{peer="C",direction="in",node="A"} 20');
    expect(text).toContain('prefixmesh_gossip_bytes_total{peer="other",direction="out",node="A"} 30');
    expect(text).toContain('prefixmesh_peer_send_failures_total{peer="other",reason="timeout",node="A"} 1');
    expect(text).not.toContain('peer="D"');
    expect(text).not.toContain('peer="E"');
  });

  it("per-peer gauges show the bound's worth, peers not live first; prefixmesh_members counts all", async () => {
    const m = createMetrics("A", { processMetrics: false, maxPeerSeries: 2 });
    const peer = (id: string, suspected: boolean, estimateTokens: number, down = false) => ({
      peer: id,
      suspected,
      down,
      estimateTokens,
      pushBackActive: false,
    });
    m.setViewProvider(() => ({
      treeTokens: 0,
      queueDepth: 0,
      pushBackActive: false,
      peers: [peer("B", false, 0), peer("C", false, 5), peer("D", true, 0, true), peer("E", false, 0)],
    }));
    const text = await m.registry.metrics();
    const shown = [...text.matchAll(/prefixmesh_peer_suspected\{peer="(\w+)"/g)].map((x) => x[1]);
    expect(shown).toEqual(["D", "C"]);
    expect(text).toContain('prefixmesh_members{state="live",node="A"} 3');
    expect(text).toContain('prefixmesh_members{state="down",node="A"} 1');
    expect(text).toContain('prefixmesh_members{state="suspected",node="A"} 0');
  });

  it("prefixmesh_peer_left is 1 only for a member that said goodbye, within the bound", async () => {
    const text = await scrapeBounded([
      notLive("B", { suspected: false }),
      notLive("C", { down: true }),
      notLive("D", { down: true, left: true }),
      notLive("E"),
    ]);
    expect(text).toContain("# TYPE prefixmesh_peer_left gauge");
    // D left, C was declared dead, E is suspected: an alert on suspected unless left fires for C and E.
    expect(text).toContain('prefixmesh_peer_left{peer="D",node="A"} 1');
    expect(text).toContain('prefixmesh_peer_left{peer="C",node="A"} 0');
    expect(text).toContain('prefixmesh_peer_left{peer="E",node="A"} 0');
    expect(text).toContain('prefixmesh_peer_suspected{peer="D",node="A"} 1');
    // The live peer is past the bound of 3 (those not live first): in neither series.
    expect(text).not.toContain('peer="B"');
  });

  it("shows a crashed peer before those that said goodbye, past the bound (a large scale-down)", async () => {
    const left = (id: string) => notLive(id, { down: true, left: true });
    const text = await scrapeBounded([
      left("L1"),
      left("L2"),
      left("L3"),
      left("L4"),
      notLive("X", { down: true }),
    ]);
    // X died: the alert on suspected unless left must still see it, whatever left before it.
    expect(text).toContain('prefixmesh_peer_suspected{peer="X",node="A"} 1');
    expect(text).toContain('prefixmesh_peer_left{peer="X",node="A"} 0');
    expect(text).not.toContain('peer="L4"');
  });
});
