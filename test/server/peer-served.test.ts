import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_COUNTED_PEERS, PeerServedCounts } from "../../src/server/runtime/peer-served.js";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { modelOf, postCompletion } from "../api-client.js";
import { waitFor } from "../e2e/helpers.js";
import { pair } from "./helpers.js";

describe("each peer's served count, as its snapshots report it", () => {
  it("grows within an epoch, is replaced by a newer one, and ignores older or bad reports", () => {
    const c = new PeerServedCounts();
    expect(c.of("B")).toBeNull();
    c.report("B", 5, undefined); // an older peer says nothing
    expect(c.of("B")).toBeNull();
    c.report("B", 5, 10);
    c.report("B", 5, 7); // a snapshot that arrived late
    expect(c.of("B")).toBe(10);
    c.report("B", 6, 2); // restarted: its counters began again
    expect(c.of("B")).toBe(2);
    c.report("B", 5, 99); // the previous incarnation's, late
    expect(c.of("B")).toBe(2);
    for (const bad of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 60]) c.report("B", 6, bad);
    expect(c.of("B")).toBe(2);
    c.forget("B");
    expect(c.of("B")).toBeNull();
  });

  it("keeps at most MAX_COUNTED_PEERS members", () => {
    const c = new PeerServedCounts();
    for (let i = 0; i <= MAX_COUNTED_PEERS; i++) c.report(`n${i}`, 1, i);
    expect(c.of("n0")).toBe(0);
    expect(c.of(`n${MAX_COUNTED_PEERS}`)).toBeNull();
  });
});

interface ClusterJson {
  id: string;
  served: number;
  peers: { id: string; served: number | null }[];
}

// Both gossip modes: the full mesh's snapshots carry the count, and so do Scuttlebutt's states.
describe.each(["full", "scuttlebutt"])(
  "/cluster shows every member's served count (two nodes, gossip %s)",
  (gossip) => {
    let a: NodeHandle;
    let b: NodeHandle;
    beforeAll(async () => {
      [a, b] = await pair({ pollMs: "100", gossip });
    });
    afterAll(async () => {
      await Promise.all([a?.stop(), b?.stop()]);
    });

    const cluster = async (n: NodeHandle) =>
      (await (await fetch(`${n.apiUrl}/cluster`)).json()) as ClusterJson;

    it("carries B's count to A on B's snapshots, and A's to B", async () => {
      const model = await modelOf(b.apiUrl);
      for (let i = 0; i < 3; i++) {
        const r = await postCompletion(b.apiUrl, { model, prompt: `question ${i} for B`, max_tokens: 2 });
        expect(r.status).toBe(200);
      }
      const ownB = (await cluster(b)).served;
      const ownA = (await cluster(a)).served;
      expect(ownA + ownB).toBe(3);
      await waitFor(
        async () => {
          const [va, vb] = await Promise.all([cluster(a), cluster(b)]);
          return va.peers[0]?.served === ownB && vb.peers[0]?.served === ownA;
        },
        15_000,
        "A to show B's served count and B to show A's",
      );
    });
  },
);
