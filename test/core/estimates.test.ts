import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Tokens } from "../../src/core/engine.js";
import { Estimates } from "../../src/core/estimates.js";
import { PeerIndex } from "../../src/core/peer-index.js";
import { RadixTree } from "../../src/core/radix-tree.js";
import { isNewer, type SnapshotHeader } from "../../src/core/snapshot.js";
import { decodeSnapshot, encodeSnapshot } from "../../src/core/snapshot-codec.js";
import { sameSet } from "./ref-model.js";
import { arbSenderEvent, senderHistory } from "./sender-history.js";

const header = (epoch: number, version: number, tokenCount = 0): SnapshotHeader => ({
  sender: "p",
  epoch,
  version,
  tokenCount,
  capacity: 1000,
  queueDepth: 0,
  pushBackMs: 0,
});

/** The estimate the index holds for owner "p" equals the sender's body at (epoch, version). */
function holds(index: PeerIndex, bodies: Map<string, Set<number>>, at: string): boolean {
  return sameSet(new Set(index.estimateKeys("p")), bodies.get(at)!);
}

describe("Estimates: the §3.4 rule", () => {
  it("any delivery order with duplicates: never regresses, and the estimate always equals the sender's tree at the held (epoch, version)", () => {
    fc.assert(
      fc.property(
        fc.array(arbSenderEvent, { minLength: 1, maxLength: 20 }),
        fc.array(fc.nat(), { maxLength: 60 }),
        (events, picks) => {
          // The sender's history: every snapshot it could have sent, and its body at each (epoch, version).
          const { sent, bodies, lastFull, tree, epoch } = senderHistory(events, {
            header: (e, t) => header(e, t.version, t.size),
            restartGap: (i) => 1 + (i % 3),
            deltaBases: (v) => [0, v - 1, v - 2],
          });
          const index = new PeerIndex();
          const est = new Estimates(index);
          let prev: { epoch: number; version: number } | undefined;
          // deliver picks (reordered, duplicated, lossy), through the codec as a peer would receive them
          for (const p of picks) {
            const s = decodeSnapshot(encodeSnapshot(sent[p % sent.length]!));
            const before = est.held("p");
            const out = est.apply(s);
            const now = est.held("p")!;
            if (prev !== undefined) expect(isNewer(prev, now)).toBe(false);
            if (out === "stale" || out === "duplicate") expect(now).toEqual(before);
            if (out === "applied") expect(now).toEqual({ epoch: s.header.epoch, version: s.header.version });
            const body = bodies.get(`${now.epoch}:${now.version}`);
            expect(body).toBeDefined();
            expect(holds(index, bodies, `${now.epoch}:${now.version}`)).toBe(true);
            prev = now;
          }
          // the newest full snapshot always brings the estimate up to date
          const last = lastFull;
          est.apply(last);
          expect(est.held("p")).toEqual({ epoch, version: tree.version });
          if (last.kind === "full") {
            const want = new Set(last.body.keys);
            expect(index.estimateSize("p")).toBe(want.size * 16);
            for (const s of tree.sequences())
              expect(index.match("p", s)).toBe(Math.floor(s.length / 16) * 16);
            expect(sameSet(want, bodies.get(`${epoch}:${tree.version}`)!)).toBe(true);
          }
        },
      ),
      { numRuns: 1000 },
    );
  });
});

describe("Estimates units", () => {
  const range = (from: number, n: number): Tokens => Uint32Array.from({ length: n }, (_, i) => from + i);

  it("stale, duplicate, delta on exact base, need-full on a gap", () => {
    const index = new PeerIndex();
    const est = new Estimates(index);
    const tree = new RadixTree({ capacity: 1000 });
    tree.insert(range(0, 32), 1);
    expect(est.apply({ kind: "full", header: header(1, 1), body: tree.snapshotBody() })).toBe("applied");
    expect(est.apply({ kind: "full", header: header(1, 1), body: tree.snapshotBody() })).toBe("duplicate");
    expect(est.apply({ kind: "heartbeat", header: header(1, 0) })).toBe("stale");
    tree.insert(range(100, 32), 2); // v2
    tree.insert(range(200, 32), 3); // v3
    expect(est.apply({ kind: "delta", header: header(1, 3), delta: tree.changesSince(2)! })).toBe(
      "need-full",
    );
    expect(est.held("p")).toEqual({ epoch: 1, version: 1 });
    expect(est.apply({ kind: "heartbeat", header: header(1, 3) })).toBe("need-full");
    expect(est.apply({ kind: "delta", header: header(1, 3), delta: tree.changesSince(1)! })).toBe("applied");
    expect(index.match("p", range(200, 32))).toBe(32);
    expect(est.apply({ kind: "heartbeat", header: { ...header(1, 3), queueDepth: 9 } })).toBe("duplicate");
  });

  it("a new epoch drops the old estimate at once; an old epoch is stale", () => {
    const index = new PeerIndex();
    const est = new Estimates(index);
    const tree = new RadixTree({ capacity: 1000 });
    tree.insert(range(0, 64), 1);
    est.apply({ kind: "full", header: header(10, 1), body: tree.snapshotBody() });
    expect(index.match("p", range(0, 64))).toBe(64);
    expect(est.apply({ kind: "heartbeat", header: header(20, 4) })).toBe("need-full");
    expect(index.match("p", range(0, 64))).toBe(0);
    expect(est.held("p")).toEqual({ epoch: 20, version: 0 });
    expect(est.apply({ kind: "full", header: header(10, 9), body: tree.snapshotBody() })).toBe("stale");
    const fresh = new RadixTree({ capacity: 1000 });
    fresh.insert(range(500, 32), 1);
    expect(est.apply({ kind: "delta", header: header(20, 1), delta: fresh.changesSince(0)! })).toBe(
      "applied",
    );
    expect(index.match("p", range(500, 32))).toBe(32);
    est.remove("p");
    expect(est.held("p")).toBeUndefined();
    expect(index.owners()).toEqual([]);
  });
});
