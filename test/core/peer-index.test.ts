import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { BLOCK_SIZE, blockKeys } from "../../src/core/block-hash.js";
import type { Tokens } from "../../src/core/engine.js";
import { PeerIndex } from "../../src/core/peer-index.js";
import { RadixTree } from "../../src/core/radix-tree.js";
import { arbSeq, RefCache } from "./ref-model.js";

/** Naive per-owner walk: leading blocks whose key the owner holds. */
function naiveMatch(keys: Set<number>, t: Tokens): number {
  let n = 0;
  for (const k of blockKeys(t)) {
    if (!keys.has(k)) break;
    n++;
  }
  return n * BLOCK_SIZE;
}

const NAMES = ["a", "b", "c", "d"];
type Op =
  | { k: "insert"; o: number; t: Tokens }
  | { k: "evict"; o: number; n: number }
  | { k: "full"; o: number }
  | { k: "delta"; o: number }
  | { k: "forward"; o: number; t: Tokens }
  | { k: "remove"; o: number }
  | { k: "query"; t: Tokens };
const owner = fc.nat({ max: NAMES.length - 1 });
const arbOp: fc.Arbitrary<Op> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ k: fc.constant("insert" as const), o: owner, t: arbSeq }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant("evict" as const), o: owner, n: fc.nat({ max: 60 }) }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant("full" as const), o: owner }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constant("delta" as const), o: owner }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant("forward" as const), o: owner, t: arbSeq }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant("remove" as const), o: owner }) },
  { weight: 4, arbitrary: fc.record({ k: fc.constant("query" as const), t: arbSeq }) },
);

describe("PeerIndex vs reference model", () => {
  it("matchAll/match/estimateSize agree with per-owner naive walks over replace/delta/forward/remove", () => {
    fc.assert(
      fc.property(fc.array(arbOp, { maxLength: 40 }), (ops) => {
        const index = new PeerIndex({ maxOwners: 8 });
        const trees = NAMES.map(() => new RadixTree({ capacity: 150 }));
        const held: (number | undefined)[] = NAMES.map(() => undefined);
        const ref = new Map<string, Set<number>>();
        let now = 0;
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
              const tree = trees[op.o]!;
              index.replaceEstimate(NAMES[op.o]!, tree.snapshotBody());
              ref.set(NAMES[op.o]!, new Set(tree.snapshotBody().keys));
              held[op.o] = tree.version;
              // a fresh estimate matches the owner's exact tree, rounded down to blocks
              const exact = new RefCache();
              for (const s of tree.sequences()) exact.insert(s);
              for (const s of tree.sequences())
                expect(index.match(NAMES[op.o]!, s)).toBe(exact.blockMatch(s));
              break;
            }
            case "delta": {
              const base = held[op.o];
              if (base === undefined) break;
              const d = trees[op.o]!.changesSince(base);
              if (d === undefined) break;
              index.applyDelta(NAMES[op.o]!, d);
              const keys = ref.get(NAMES[op.o]!)!;
              for (const k of d.removed) keys.delete(k);
              for (const k of d.added) keys.add(k);
              held[op.o] = d.version;
              break;
            }
            case "forward": {
              // A guess goes only into an estimate held (an unknown owner stays unknown).
              index.updateTrieEstimate(NAMES[op.o]!, op.t);
              const keys = ref.get(NAMES[op.o]!);
              if (keys) for (const k of blockKeys(op.t)) keys.add(k);
              break;
            }
            case "remove":
              index.removePeer(NAMES[op.o]!);
              ref.delete(NAMES[op.o]!);
              held[op.o] = undefined;
              break;
            case "query": {
              const { owners, lengths } = index.matchAll(op.t);
              expect(owners.length).toBe(lengths.length);
              expect(new Set(owners)).toEqual(new Set(ref.keys()));
              owners.forEach((o, i) => {
                expect(lengths[i]).toBe(naiveMatch(ref.get(o)!, op.t));
                expect(index.match(o, op.t)).toBe(lengths[i]);
              });
              break;
            }
          }
          for (const [o, keys] of ref) expect(index.estimateSize(o)).toBe(keys.size * BLOCK_SIZE);
          const union = new Set<number>();
          for (const keys of ref.values()) for (const k of keys) union.add(k);
          expect(index.keyCount).toBe(union.size);
        }
      }),
      { numRuns: 1000 },
    );
  });

  it("handles more than 32 owners (multi-word owner sets)", () => {
    fc.assert(
      // owners' sequences come from a seeded generator: 40 fast-check arrays per run cost seconds
      fc.property(fc.integer({ min: 33, max: 40 }), fc.nat(), arbSeq, (n, seed, q) => {
        const seqs = seededSeqs(n, seed);
        const index = new PeerIndex({ maxOwners: 64 });
        for (const [i, s] of seqs.entries()) {
          hold(index, `n${i}`);
          index.updateTrieEstimate(`n${i}`, s);
        }
        for (const probe of [q, ...seqs.slice(0, 3)]) {
          const { owners, lengths } = index.matchAll(probe);
          const want = owners.map((o) => {
            const s = seqs[Number(o.slice(1))]!;
            let m = 0;
            while (m < s.length && m < probe.length && s[m] === probe[m]) m++;
            return Math.floor(m / BLOCK_SIZE) * BLOCK_SIZE;
          });
          expect(owners.length).toBe(seqs.length);
          expect(Array.from(lengths)).toEqual(want);
        }
      }),
      { numRuns: 1000 },
    );
  });
});

/** Makes `owner` held, with an empty estimate (as the first empty snapshot of an epoch does). */
function hold(index: PeerIndex, owner: string): void {
  index.replaceEstimate(owner, { blockSize: BLOCK_SIZE, keys: new Float64Array(0) });
}

function seededSeqs(n: number, seed: number): Tokens[] {
  let x = seed | 1;
  const rnd = (m: number): number => {
    x = (Math.imul(x, 1103515245) + 12345) & 0x7fffffff;
    return x % m;
  };
  const bases = [0, 1, 2].map((b) => Array.from({ length: 48 }, (_, i) => (b * 7919 + i * 31) % 97));
  return Array.from({ length: n }, () => {
    const base = (bases[rnd(4)] ?? []).slice(0, rnd(49));
    const suffix = Array.from({ length: rnd(20) }, () => rnd(4));
    return Uint32Array.from([...base, ...suffix]);
  });
}

describe("PeerIndex units", () => {
  const range = (from: number, n: number): Tokens => Uint32Array.from({ length: n }, (_, i) => from + i);

  it("answers every owner in one walk, block-granular", () => {
    const index = new PeerIndex();
    for (const o of ["x", "y", "z"]) hold(index, o);
    index.updateTrieEstimate("x", range(0, 100)); // 6 blocks
    index.updateTrieEstimate("y", range(0, 40)); // 2 blocks
    index.updateTrieEstimate("z", range(500, 64));
    const { owners, lengths } = index.matchAll(range(0, 90));
    expect(owners).toEqual(["x", "y", "z"]);
    expect(Array.from(lengths)).toEqual([80, 32, 0]);
  });

  it("replaceEstimate drops what the new body lacks; removePeer forgets the owner", () => {
    const index = new PeerIndex();
    const tree = new RadixTree({ capacity: 1000 });
    tree.insert(range(0, 64), 1);
    index.replaceEstimate("p", tree.snapshotBody());
    expect(index.match("p", range(0, 64))).toBe(64);
    tree.evict(64);
    tree.insert(range(100, 32), 2);
    index.replaceEstimate("p", tree.snapshotBody());
    expect(index.match("p", range(0, 64))).toBe(0);
    expect(index.match("p", range(100, 32))).toBe(32);
    expect(index.estimateSize("p")).toBe(32);
    index.removePeer("p");
    expect(index.owners()).toEqual([]);
    expect(index.keyCount).toBe(0);
    expect(index.matchAll(range(100, 32)).lengths.length).toBe(0);
  });

  it("refuses more owners than maxOwners and reuses freed slots", () => {
    const index = new PeerIndex({ maxOwners: 2 });
    hold(index, "a");
    hold(index, "b");
    expect(() => hold(index, "c")).toThrow(RangeError);
    index.removePeer("a");
    hold(index, "c");
    expect(index.owners().sort()).toEqual(["b", "c"]);
    expect(() => new PeerIndex({ maxOwners: 0 })).toThrow(RangeError);
  });

  it("bounds each owner's estimate at maxKeysPerOwner, whatever a peer sends", () => {
    const index = new PeerIndex({ maxKeysPerOwner: 3 });
    hold(index, "a");
    index.updateTrieEstimate("a", range(0, 160)); // 10 blocks
    expect(index.estimateSize("a")).toBe(48);
    expect(index.match("a", range(0, 160))).toBe(48);
    index.applyDelta("a", {
      baseVersion: 0,
      version: 1,
      added: Float64Array.of(1, 2, 3, 4),
      removed: new Float64Array(0),
    });
    expect(index.estimateSize("a")).toBe(48);
    index.replaceEstimate("a", { blockSize: 16, keys: Float64Array.of(1, 2, 3, 4, 5) });
    expect(index.estimateSize("a")).toBe(48);
  });

  it("adds a forward's guess only to an estimate held: an unknown owner is not created", () => {
    const index = new PeerIndex({ maxOwners: 1 });
    index.updateTrieEstimate("stranger", range(0, 64));
    expect(index.has("stranger")).toBe(false);
    expect(index.owners()).toEqual([]);
    expect(index.keyCount).toBe(0);
    // Its owner slot is still free for a member whose snapshot arrives.
    hold(index, "a");
    index.updateTrieEstimate("a", range(0, 64));
    expect(index.match("a", range(0, 64))).toBe(64);
    // A removed owner gets no guesses either (a late result after it left).
    index.removePeer("a");
    index.updateTrieEstimate("a", range(0, 64));
    expect(index.has("a")).toBe(false);
  });

  it("rejects a body with a different block size", () => {
    const index = new PeerIndex();
    expect(() => index.replaceEstimate("a", { blockSize: 32, keys: new Float64Array(0) })).toThrow(
      RangeError,
    );
  });
});
