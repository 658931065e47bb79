/** The byte breakdown (mesh-parts.ts): its parts sum to the bytes sent, and redundancy is found. */
import { afterEach, describe, expect, it, vi } from "vitest";
import { gossipSize } from "../../src/core/node/gossip/size.js";
import type { MeshGossip } from "../../src/core/node/gossip/summary.js";
import { PrefixNode } from "../../src/core/node/node.js";
import type { NodeInput } from "../../src/core/node/types.js";
import { GossipRounds } from "../../src/sim/gossip-rounds.js";
import { addGossipParts, type MeshParts } from "../../src/sim/mesh-parts.js";
import { runSimulation } from "../../src/sim/run.js";
import { daemonSimConfig, tinyWorkload } from "./helpers.js";

/** Parts that count bytes already inside another part. */
const inside = (k: string) => k === "keys" || k.startsWith("redundant-");

function sum(parts: MeshParts): number {
  let n = 0;
  for (const [k, v] of Object.entries(parts)) if (!inside(k)) n += v.bytes;
  return n;
}

describe("mesh parts", () => {
  for (const maxEstimates of [undefined, 4]) {
    it(`sum to the bytes sent by the rounds model (maxEstimates ${maxEstimates ?? "all"})`, () => {
      const g = new GossipRounds({ nodes: 12, seed: 3, ...(maxEstimates ? { maxEstimates } : {}) });
      for (let i = 0; i < 12; i++) g.change(i);
      g.parts = {};
      const bytes0 = g.bytes;
      for (let r = 0; r < 4; r++) {
        for (let i = 0; i < 12; i++) g.change(i, 2);
        g.round();
      }
      expect(sum(g.parts)).toBe(g.bytes - bytes0);
      expect(g.parts["digest-entries"]?.count ?? 0).toBeGreaterThan(0);
      expect(g.parts.keys?.bytes ?? 0).toBeGreaterThan(0);
    });
  }

  it("counts a state the receiver already holds at that version or newer as redundant", () => {
    const header = {
      sender: "n1",
      epoch: 1,
      version: 3,
      tokenCount: 0,
      capacity: 0,
      queueDepth: 0,
      pushBackMs: 0,
    };
    const delta = { baseVersion: 2, version: 3, added: Float64Array.of(7, 9), removed: new Float64Array() };
    const msg = {
      type: "states" as const,
      states: [{ snapshot: { kind: "delta" as const, header, delta }, blocks: 2 }],
      wants: [],
    };
    for (const [held, from, part] of [
      [{ epoch: 1, version: 3 }, "n1", "redundant-push-delta"],
      [{ epoch: 1, version: 9 }, "n4", "redundant-relay-delta"],
      [{ epoch: 1, version: 2 }, "n4", undefined],
    ] as const) {
      const parts: MeshParts = {};
      addGossipParts(parts, msg, from, () => held);
      expect(sum(parts)).toBe(gossipSize(msg));
      expect(parts.keys).toEqual({ count: 2, bytes: 12 });
      const redundant = Object.keys(parts).filter((k) => k.startsWith("redundant-"));
      expect(redundant).toEqual(part === undefined ? [] : [part]);
    }
  });
});

describe("mesh parts in the node simulator", () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it("tells a node's renewal digest (its load on it) from its round and greeting digests", () => {
    const load = { queueDepth: 2, pushBackMs: 0 };
    const entry = (owner: string) => ({ owner, epoch: 1, version: 4 });
    const renewal: MeshGossip = { type: "digest", entries: [entry("n2")], room: 0, load, summary: 7 };
    const greeting: MeshGossip = { type: "digest", entries: [entry("n1")], room: 1, load };
    const round: MeshGossip = { type: "digest", entries: [entry("n1"), entry("n3")], room: 0, load };
    const parts: MeshParts = {};
    addGossipParts(parts, renewal, "n1");
    expect(parts["digest-renewal"]).toEqual({ count: 1, bytes: gossipSize(renewal) });
    addGossipParts(parts, greeting, "n1");
    addGossipParts(parts, round, "n1");
    expect(parts["digest-renewal"]?.count).toBe(1);
    expect(parts["digest-head"]?.count).toBe(2);
    expect(parts["digest-entries"]?.count).toBe(3);
  });

  it("counts what the live incarnation handles: renewals apart, nothing sent to a crashed one", () => {
    // Handled mesh messages, counted where the node takes them.
    let handled = 0;
    const real = PrefixNode.prototype.handle;
    vi.spyOn(PrefixNode.prototype, "handle").mockImplementation(function (
      this: PrefixNode,
      input: NodeInput,
    ) {
      if (input.type === "mesh-message") handled++;
      return real.call(this, input);
    });
    // Restarts within a link's delay: messages sent to the old incarnation land on the new one.
    const crashes = [1, 2, 3].map((node, i) => ({
      node,
      atMs: 3_000 + 1_500 * i,
      restartAtMs: 3_001 + 1_500 * i,
    }));
    const w = tinyWorkload({
      seed: 4,
      requests: 120,
      topics: 8,
      prefix: 200,
      arrival: "open-loop",
      gapMs: 60,
    });
    const r = runSimulation(
      {
        ...daemonSimConfig(4, 12),
        commMs: 50,
        jitterMs: 10,
        gossip: "scuttlebutt",
        maxEstimates: 4,
        meshParts: true,
        settleMs: 2_000,
        faults: { node: { crashes } },
      },
      w,
    );
    const parts = r.totals.meshParts ?? {};
    expect(parts.channel?.count).toBe(handled);
    expect(parts["digest-renewal"]?.count ?? 0).toBeGreaterThan(0);
  }, 120_000);
});

describe("holders-first relaying (push to holders)", () => {
  it("a change taken this round is not relayed to holders: few states arrive twice, all stay current", () => {
    const g = new GossipRounds({ nodes: 16, seed: 1, maxEstimates: 64 });
    for (let i = 0; i < 16; i++) g.change(i);
    for (let r = 0; r < 6; r++) g.round();
    g.parts = {};
    const bytes0 = g.bytes;
    for (let r = 0; r < 4; r++) {
      for (let i = 0; i < 16; i++) g.change(i, 2);
      g.round();
    }
    let redundant = 0;
    for (const [k, v] of Object.entries(g.parts)) if (k.startsWith("redundant-")) redundant += v.bytes;
    // Relaying every fresh delta made about a fifth of the bytes states the receiver already held.
    expect(redundant).toBeLessThan(0.05 * (g.bytes - bytes0));
    for (let i = 0; i < 16; i++) expect(g.holding(i)).toEqual({ held: 15, current: 15 });
  });

  it("a sampled digest says room 0, so no whole key set goes to a member that holds it", () => {
    // 40 nodes, room for 64: every digest is a sample (39 held > 16), and every node has room.
    const g = new GossipRounds({ nodes: 40, seed: 2, maxEstimates: 64 });
    for (let i = 0; i < 40; i++) g.change(i);
    for (let r = 0; r < 8; r++) g.round();
    g.parts = {};
    for (let r = 0; r < 4; r++) {
      for (let i = 0; i < 40; i++) g.change(i, 2);
      g.round();
    }
    const wholeTwice = Object.entries(g.parts).filter(
      ([k]) => k.startsWith("redundant-") && k.endsWith("-full"),
    );
    expect(wholeTwice).toEqual([]);
    for (let i = 0; i < 40; i++) expect(g.holding(i)).toEqual({ held: 39, current: 39 });
  });
});
