/**
 * The oracle's shortcuts (only changed owners, and only the pairs a real snapshot showed older
 * figures, are refreshed; one key set per owner shared by the nodes whose estimates equal it) must
 * route exactly as the naive reference does — every pair checked after every event, a re-push after
 * every real snapshot, each node's own PeerIndex — so a seeded run's routing and hits match.
 */
import { describe, expect, it } from "vitest";
import type { PrefixNode } from "../../src/core/node/node.js";
import { PeerIndex } from "../../src/core/peer-index.js";
import type { SnapshotHeader } from "../../src/core/snapshot.js";
import { Oracle, type Pushed } from "../../src/sim/oracle.js";
import type { SimProbe } from "../../src/sim/probe.js";
import { runSimulation } from "../../src/sim/run.js";
import { SharedPeerIndex } from "../../src/sim/shared-estimates.js";
import type { SimConfig, SimResult } from "../../src/sim/types.js";
import { syntheticMmlu } from "../../src/workload/synthetic.js";
import { smallCluster } from "./helpers.js";

/**
 * What routing decided and what it hit, per request. Not the bytes: the reference also re-pushes
 * after a real snapshot that already showed the truth, which moves only anti-entropy's acks.
 */
function outcome(r: SimResult) {
  return {
    records: r.records.map((x) => [x.index, x.target, x.served, x.actualHitTokens, x.latencyMs, x.retries]),
    hit: r.totals.actualHitRate,
    answered: r.totals.answered,
  };
}

function both(over: Partial<SimConfig>, requests: number, seed: number) {
  const config = smallCluster({
    nodes: 6,
    policy: "cost-aware",
    pollMs: 200,
    capacityTokens: 8000,
    seed,
    oracle: true,
    settleMs: 1000,
    ...over,
  });
  const workload = syntheticMmlu({ seed, requests, openLoopRate: 30 });
  const fast = runSimulation(config, workload);
  // The reference: no shortcut, and every node's own PeerIndex (no key set shared across nodes).
  const naive = runSimulation({ ...config, oracleExhaustive: true, oracleOwnIndexes: true }, workload);
  return { fast, naive };
}

describe("oracle shortcuts = the naive full refresh", () => {
  it("the same routing and hits on a seeded run with a crash and a restart", () => {
    const { fast, naive } = both(
      { faults: { node: { crashes: [{ node: 5, atMs: 3000, restartAtMs: 6000 }] } } },
      240,
      11,
    );
    expect(fast.totals.answered).toBe(240);
    // Routing took peers (not all local), so the estimates mattered.
    expect(fast.totals.forwardedShare).toBeGreaterThan(0);
    expect(outcome(fast)).toEqual(outcome(naive));
  });

  it("the same with a paused node (refreshes to it wait until it resumes) and the centralized baseline", () => {
    const { fast, naive } = both(
      { policy: "centralized", faults: { node: { pauses: [{ node: 2, atMs: 2000, untilMs: 3500 }] } } },
      240,
      12,
    );
    expect(fast.totals.answered).toBe(240);
    expect(outcome(fast)).toEqual(outcome(naive));
  });
});

describe("oracle shared key sets = every node's own PeerIndex", () => {
  it("the same records, latencies and gossip on a 12-node cost-aware run with a crash", () => {
    const config = smallCluster({
      nodes: 12,
      policy: "cost-aware",
      pollMs: 200,
      capacityTokens: 6000,
      seed: 5,
      oracle: true,
      settleMs: 1000,
      faults: { node: { crashes: [{ node: 11, atMs: 2000 }] } },
    });
    const workload = syntheticMmlu({ seed: 5, requests: 300, openLoopRate: 60 });
    // Which index each run's nodes hold, read once mid-run: the comparison means nothing unless one shares.
    const indexes = (into: string[]): SimProbe => ({
      everyMs: 1500,
      observe: (_now, nodes) => {
        if (into.length === 0) for (const n of nodes) if (n) into.push(n.peerIndex().constructor.name);
      },
    });
    const sharedKinds: string[] = [];
    const ownKinds: string[] = [];
    const shared = runSimulation(config, workload, { probe: indexes(sharedKinds) });
    const own = runSimulation({ ...config, oracleOwnIndexes: true }, workload, { probe: indexes(ownKinds) });
    expect(new Set(sharedKinds)).toEqual(new Set([SharedPeerIndex.name]));
    expect(new Set(ownKinds)).toEqual(new Set([PeerIndex.name]));
    expect(shared.totals.answered).toBe(300);
    expect(shared.totals.forwardedShare).toBeGreaterThan(0);
    expect(outcome(shared)).toEqual(outcome(own));
    // Only the estimates' storage differs: the same messages, byte for byte.
    expect(shared.totals.messages).toEqual(own.totals.messages);
    expect(shared.totals.messagesTotal).toBeGreaterThan(0);
    expect(shared.totals.meanLatencyMs).toBe(own.totals.meanLatencyMs);
  });
});

describe("Oracle bookkeeping", () => {
  const s: Pushed = { epoch: 1, version: 3, queueDepth: 0, pushBackMs: 0 };
  const header = (p: Pushed): SnapshotHeader => ({ sender: "n0", tokenCount: 0, capacity: 1, ...p });
  /** Just what `stateOf` reads of a node. */
  const owner = (p: Pushed) =>
    ({
      currentEpoch: p.epoch,
      localTree: () => ({ version: p.version }),
      reportedDepth: () => p.queueDepth,
      currentPushBackMs: () => p.pushBackMs,
    }) as unknown as PrefixNode;

  it("a real snapshot with older figures makes only its own pair need a refresh", () => {
    const o = new Oracle(4);
    expect(o.peersToCheck(0, s)).toBe("all");
    for (const j of [1, 2, 3]) expect(o.take(0, j, s)).toBe(true);
    o.passed(0, s, true);
    expect(o.peersToCheck(0, s)).toEqual([]);
    expect(o.take(0, 2, s)).toBe(false);
    // A real snapshot showing the owner as it is needs nothing after it; older figures do.
    o.afterReal(0, 2, header(s), owner(s));
    expect(o.peersToCheck(0, s)).toEqual([]);
    o.afterReal(0, 3, header({ ...s, queueDepth: 2 }), owner(s));
    o.afterReal(0, 1, header({ ...s, version: 2 }), owner(s));
    expect(o.peersToCheck(0, s)).toEqual([1, 3]);
    // The owner changed: every peer again.
    expect(o.peersToCheck(0, { ...s, queueDepth: 1 })).toBe("all");
  });

  it("an incomplete pass (a paused peer) leaves the owner to be checked against every peer again", () => {
    const o = new Oracle(3);
    o.take(0, 1, s);
    o.passed(0, s, false);
    expect(o.peersToCheck(0, s)).toBe("all");
    o.passed(0, s, true);
    expect(o.peersToCheck(0, s)).toEqual([]);
    // A restart forgets every owner's pass, and what the restarted node was sent.
    o.take(0, 2, s);
    o.reset(2);
    expect(o.peersToCheck(0, s)).toBe("all");
    expect(o.take(0, 2, s)).toBe(true);
    expect(o.take(0, 1, s)).toBe(false);
  });
});
