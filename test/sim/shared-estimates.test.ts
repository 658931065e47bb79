/**
 * The oracle's shared key sets must hold, per node, exactly what that node's own PeerIndex would:
 * two nodes apply the same snapshot objects (as the oracle hands them out), each sometimes guesses
 * on its own (optimistic inserts), and every answer is compared with a PeerIndex fed the same.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Tokens } from "../../src/core/engine.js";
import { PeerIndex } from "../../src/core/peer-index.js";
import { RadixTree } from "../../src/core/radix-tree.js";
import type { SnapshotBody, SnapshotDelta } from "../../src/core/snapshot.js";
import { SharedKeySets, SharedPeerIndex } from "../../src/sim/shared-estimates.js";
import { arbSeq } from "../core/ref-model.js";

const NAMES = ["a", "b", "c"];
type Op =
  | { k: "insert"; o: number; t: Tokens }
  | { k: "evict"; o: number; n: number }
  | { k: "full"; o: number; to: number }
  | { k: "delta"; o: number; to: number }
  | { k: "forward"; o: number; at: number; t: Tokens }
  | { k: "cap"; o: number; keys: number }
  | { k: "remove"; o: number; at: number }
  | { k: "query"; t: Tokens };
const owner = fc.nat({ max: NAMES.length - 1 });
/** 0, 1: that node alone; 2: both (the same snapshot object). */
const to = fc.nat({ max: 2 });
const node = fc.nat({ max: 1 });
const arbOp: fc.Arbitrary<Op> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ k: fc.constant("insert" as const), o: owner, t: arbSeq }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant("evict" as const), o: owner, n: fc.nat({ max: 60 }) }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant("full" as const), o: owner, to }) },
  { weight: 4, arbitrary: fc.record({ k: fc.constant("delta" as const), o: owner, to }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant("forward" as const), o: owner, at: node, t: arbSeq }) },
  {
    weight: 1,
    arbitrary: fc.record({ k: fc.constant("cap" as const), o: owner, keys: fc.nat({ max: 12 }) }),
  },
  { weight: 1, arbitrary: fc.record({ k: fc.constant("remove" as const), o: owner, at: node }) },
  { weight: 4, arbitrary: fc.record({ k: fc.constant("query" as const), t: arbSeq }) },
);

const sorted = (a: Float64Array) => [...a].sort((x, y) => x - y);

describe("SharedPeerIndex = PeerIndex, node by node", () => {
  it("matches, sizes and keys agree over fulls, deltas, guesses, caps and removals", () => {
    fc.assert(
      fc.property(fc.array(arbOp, { maxLength: 50 }), (ops) => {
        const sets = new SharedKeySets();
        const shared = [new SharedPeerIndex(8, sets), new SharedPeerIndex(8, sets)];
        const own = [new PeerIndex({ maxOwners: 8 }), new PeerIndex({ maxOwners: 8 })];
        const trees = NAMES.map(() => new RadixTree({ capacity: 150 }));
        // Per node, per owner: the version its estimate is at (deltas apply on top of exactly it).
        const held: (number | undefined)[][] = [NAMES.map(() => undefined), NAMES.map(() => undefined)];
        let now = 0;
        const nodesOf = (t: number) => (t === 2 ? [0, 1] : [t]);
        for (const op of ops) {
          now++;
          switch (op.k) {
            case "insert":
              trees[op.o]!.insert(op.t, now);
              break;
            case "evict":
              trees[op.o]!.evict(op.n);
              break;
            case "full": {
              const body: SnapshotBody = trees[op.o]!.snapshotBody();
              for (const i of nodesOf(op.to)) {
                shared[i]!.replaceEstimate(NAMES[op.o]!, body);
                own[i]!.replaceEstimate(NAMES[op.o]!, body);
                held[i]![op.o] = trees[op.o]!.version;
              }
              break;
            }
            case "delta": {
              const made = new Map<number, SnapshotDelta | undefined>();
              for (const i of nodesOf(op.to)) {
                const base = held[i]![op.o];
                if (base === undefined) continue;
                if (!made.has(base)) made.set(base, trees[op.o]!.changesSince(base));
                const d = made.get(base);
                if (d === undefined) continue;
                shared[i]!.applyDelta(NAMES[op.o]!, d);
                own[i]!.applyDelta(NAMES[op.o]!, d);
                held[i]![op.o] = d.version;
              }
              break;
            }
            case "forward":
              shared[op.at]!.updateTrieEstimate(NAMES[op.o]!, op.t);
              own[op.at]!.updateTrieEstimate(NAMES[op.o]!, op.t);
              break;
            case "cap":
              for (const x of [...shared, ...own]) x.capOwner(NAMES[op.o]!, op.keys);
              break;
            case "remove":
              shared[op.at]!.removePeer(NAMES[op.o]!);
              own[op.at]!.removePeer(NAMES[op.o]!);
              held[op.at]![op.o] = undefined;
              break;
            case "query":
              for (const i of [0, 1]) {
                const a = shared[i]!.matchAll(op.t);
                const b = own[i]!.matchAll(op.t);
                expect(a.owners).toEqual(b.owners);
                expect([...a.lengths]).toEqual([...b.lengths]);
                for (const o of NAMES) expect(shared[i]!.match(o, op.t)).toBe(own[i]!.match(o, op.t));
              }
              break;
          }
          for (const i of [0, 1]) {
            expect(shared[i]!.owners()).toEqual(own[i]!.owners());
            expect(shared[i]!.keyCount).toBe(own[i]!.keyCount);
            for (const o of NAMES) {
              expect(shared[i]!.has(o)).toBe(own[i]!.has(o));
              expect(shared[i]!.estimateSize(o)).toBe(own[i]!.estimateSize(o));
              expect(sorted(shared[i]!.estimateKeys(o))).toEqual(sorted(own[i]!.estimateKeys(o)));
            }
          }
        }
      }),
      { numRuns: 500 },
    );
  });

  it("nodes given the same snapshots hold one key set per owner, not a copy each", () => {
    const sets = new SharedKeySets();
    const nodes = Array.from({ length: 5 }, () => new SharedPeerIndex(8, sets));
    const tree = new RadixTree({ capacity: 1000 });
    tree.insert(
      Uint32Array.from({ length: 64 }, (_, i) => i),
      1,
    );
    const body = tree.snapshotBody();
    const v0 = tree.version;
    for (const n of nodes) n.replaceEstimate("a", body);
    tree.insert(
      Uint32Array.from({ length: 80 }, (_, i) => 100 + i),
      2,
    );
    const d = tree.changesSince(v0) as SnapshotDelta;
    for (const n of nodes) n.applyDelta("a", d);
    const held = new Set(nodes.map((n) => n.heldSets()[0]));
    expect(held.size).toBe(1);
    expect(sets.made).toBe(2);
    // A guess the owner's set lacks gives that node its own copy; the others keep the shared one.
    (nodes[0] as SharedPeerIndex).updateTrieEstimate(
      "a",
      Uint32Array.from({ length: 32 }, (_, i) => 500 + i),
    );
    expect(new Set(nodes.map((n) => n.heldSets()[0])).size).toBe(2);
    expect(nodes[0]?.estimateSize("a")).toBe((nodes[1]?.estimateSize("a") ?? 0) + 32);
  });

  it("overrides every PeerIndex member that reads the merged table (a new one must be added there too)", () => {
    // Inherited on purpose: the caps (a map both use), the staged replacement (never staged here:
    // beginReplace throws), and the base's private helpers, which only its own overridden methods call.
    const inherited = new Set([
      "constructor",
      "capOwner",
      "capOf",
      "replacing",
      "stepReplace",
      "growStep",
      "takeTable",
      "checkNotStaged",
      "checkBlockSize",
      "ownerFor",
      "rebuildOwnerList",
      "addKey",
      "removeKey",
      "setBit",
      "clearBit",
    ]);
    const own = new Set(Object.getOwnPropertyNames(SharedPeerIndex.prototype));
    const missing = Object.getOwnPropertyNames(PeerIndex.prototype).filter(
      (m) => !inherited.has(m) && !own.has(m),
    );
    expect(missing).toEqual([]);
  });
});
