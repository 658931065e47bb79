import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { blockKeys } from "../../src/core/block-hash.js";
import type { Tokens } from "../../src/core/engine.js";
import { type LockHandle, RadixTree } from "../../src/core/radix-tree.js";
import { arbSeq, keyOf, RefCache, sameSet, setOf } from "./ref-model.js";

const T = (...xs: number[]): Tokens => Uint32Array.from(xs);
const range = (from: number, n: number): Tokens => Uint32Array.from({ length: n }, (_, i) => from + i);

type Op =
  | { k: "insert"; t: Tokens }
  | { k: "match"; t: Tokens }
  | { k: "lock"; t: Tokens }
  | { k: "unlock"; i: number }
  | { k: "evict"; n: number }
  | { k: "reset"; seqs: Tokens[] };

const arbOp: fc.Arbitrary<Op> = fc.oneof(
  { weight: 6, arbitrary: arbSeq.map((t) => ({ k: "insert" as const, t })) },
  { weight: 2, arbitrary: arbSeq.map((t) => ({ k: "match" as const, t })) },
  { weight: 2, arbitrary: arbSeq.map((t) => ({ k: "lock" as const, t })) },
  { weight: 2, arbitrary: fc.nat({ max: 7 }).map((i) => ({ k: "unlock" as const, i })) },
  { weight: 3, arbitrary: fc.integer({ min: 0, max: 60 }).map((n) => ({ k: "evict" as const, n })) },
  { weight: 1, arbitrary: fc.array(arbSeq, { maxLength: 4 }).map((seqs) => ({ k: "reset" as const, seqs })) },
);

describe("RadixTree vs reference model", () => {
  it("agrees on match, size, sequences, keys, locks, eviction and deltas", () => {
    fc.assert(
      fc.property(fc.array(arbOp, { maxLength: 30 }), (ops) => {
        const tree = new RadixTree({ capacity: 200 });
        const ref = new RefCache();
        const locks: { h: LockHandle; prefix: string; len: number; t: Tokens }[] = [];
        const bodies = new Map<number, Set<number>>([[0, new Set()]]);
        let now = 0;
        for (const op of ops) {
          now++;
          const v0 = tree.version;
          switch (op.k) {
            case "insert": {
              const added = tree.insert(op.t, now);
              expect(added).toBe(ref.insert(op.t));
              expect(tree.version).toBe(v0 + (added > 0 ? 1 : 0));
              break;
            }
            case "match":
              expect(tree.match(op.t)).toBe(ref.match(op.t));
              break;
            case "lock": {
              const { length, handle } = tree.lock(op.t);
              expect(length).toBe(ref.match(op.t));
              expect(tree.version).toBe(v0);
              locks.push({ h: handle, prefix: keyOf(op.t, length), len: length, t: op.t });
              break;
            }
            case "unlock": {
              if (locks.length === 0) break;
              const [l] = locks.splice(op.i % locks.length, 1);
              tree.unlock(l!.h);
              expect(() => tree.unlock(l!.h)).toThrow();
              expect(tree.version).toBe(v0);
              break;
            }
            case "evict": {
              const runs = tree.evict(op.n);
              let freed = 0;
              for (const r of runs) {
                expect(r.keep).toBeGreaterThanOrEqual(0);
                expect(r.keep).toBeLessThan(r.path.length);
                // exactly what went: the run existed, as a leaf tail, and no locked prefix covers it
                expect(ref.match(r.path)).toBe(r.path.length);
                for (const l of locks) {
                  expect(
                    keyOf(l.t, Math.min(l.len, r.keep + 1)) === keyOf(r.path, r.keep + 1) && l.len > r.keep,
                  ).toBe(false);
                }
                ref.removeRun(r.path, r.keep);
                freed += r.path.length - r.keep;
              }
              expect(freed).toBeLessThanOrEqual(op.n); // partial tail eviction: never more than asked
              if (freed < op.n) {
                // nothing evictable remains: every cached token lies on a locked prefix
                const locked = new Set<string>();
                for (const l of locks) for (let i = 1; i <= l.len; i++) locked.add(keyOf(l.t, i));
                for (const p of ref.prefixes()) expect(locked.has(p)).toBe(true);
              }
              expect(tree.version).toBe(v0 + (freed > 0 ? 1 : 0));
              break;
            }
            case "reset": {
              for (const l of locks) tree.unlock(l.h); // resetTo does not honour locks: drop them first
              locks.length = 0;
              tree.resetTo(op.seqs, now);
              ref.seqs = op.seqs.filter((s) => s.length > 0).map((s) => Array.from(s));
              break;
            }
          }
          expect(tree.size).toBe(ref.prefixes().size);
          expect(tree.free()).toBe(200 - tree.size);
          expect(sameSet(new Set(tree.sequences().map((s) => keyOf(s))), ref.leaves())).toBe(true);
          const keys = setOf(tree.snapshotBody().keys);
          expect(sameSet(keys, ref.blockKeySet())).toBe(true);
          bodies.set(tree.version, keys);
          for (const l of locks) expect(tree.match(l.t)).toBeGreaterThanOrEqual(l.len);
          // Asked at every version (deltas are kept per version): a kept one must not outlive it.
          checkDeltas();
        }
        expect(tree.changesSince(tree.version + 1)).toBeUndefined();

        // every delta the log still answers turns the body at its base into the current body
        function checkDeltas(): void {
          const current = setOf(tree.snapshotBody().keys);
          for (const [v, body] of bodies) {
            const d = tree.changesSince(v);
            if (d === undefined) continue;
            expect(d.baseVersion).toBe(v);
            expect(d.version).toBe(tree.version);
            const got = new Set(body);
            for (const k of d.removed) {
              expect(got.has(k)).toBe(true);
              got.delete(k);
            }
            for (const k of d.added) {
              expect(got.has(k)).toBe(false);
              got.add(k);
            }
            expect(sameSet(got, current)).toBe(true);
          }
        }
      }),
      { numRuns: 1000 },
    );
  });
});

describe("RadixTree as Algorithm 1 uses it", () => {
  it("lock, evict what the prompt needs, insert, unlock: never above capacity, the locked prefix always survives", () => {
    fc.assert(
      fc.property(fc.array(arbSeq, { maxLength: 40 }), (prompts) => {
        const tree = new RadixTree({ capacity: 80 }); // every prompt fits (≤ 72 tokens)
        let now = 0;
        for (const t of prompts) {
          const { length, handle } = tree.lock(t);
          const need = t.length - length;
          if (need > tree.free()) tree.evict(need - tree.free());
          expect(tree.match(t)).toBe(length);
          expect(tree.free()).toBeGreaterThanOrEqual(need);
          expect(tree.insert(t, ++now)).toBe(need);
          tree.unlock(handle);
          expect(tree.size).toBeLessThanOrEqual(80);
          expect(tree.match(t)).toBe(t.length);
        }
      }),
      { numRuns: 1000 },
    );
  });
});

describe("RadixTree units", () => {
  it("splits an edge on a partial match and keeps both branches", () => {
    const tree = new RadixTree({ capacity: 100 });
    expect(tree.insert(T(1, 2, 3, 4), 1)).toBe(4);
    expect(tree.insert(T(1, 2, 9), 2)).toBe(1);
    expect(tree.size).toBe(5);
    expect(tree.match(T(1, 2, 3, 4, 5))).toBe(4);
    expect(tree.match(T(1, 2, 9))).toBe(3);
    expect(tree.match(T(1, 7))).toBe(1);
    expect(
      tree
        .sequences()
        .map((s) => keyOf(s))
        .sort(),
    ).toEqual(["1,2,3,4", "1,2,9"]);
  });

  it("merges a useless split after eviction: the survivor is one edge again", () => {
    const tree = new RadixTree({ capacity: 100 });
    tree.insert(T(1, 2, 3, 4), 1);
    tree.insert(T(1, 2, 9), 2);
    const runs = tree.evict(4); // LRU leaf is [3,4] (time 1): whole, then the rest from [1,2,9]
    expect(runs[0]).toEqual({ path: T(1, 2, 3, 4), keep: 2 });
    // after the merge, [1,2,9] is a single leaf: partial eviction takes its tail
    expect(runs[1]).toEqual({ path: T(1, 2, 9), keep: 1 });
    expect(tree.size).toBe(1);
    expect(tree.sequences()).toEqual([T(1)]);
  });

  it("evicts least recently used first and only the tail it needs", () => {
    const tree = new RadixTree({ capacity: 100 });
    tree.insert(range(0, 10), 1);
    tree.insert(range(100, 10), 2);
    tree.insert(range(0, 10), 3); // touch the first again: the second is now LRU
    const runs = tree.evict(3);
    expect(runs).toEqual([{ path: range(100, 10), keep: 7 }]);
    expect(tree.match(range(100, 10))).toBe(7);
    expect(tree.match(range(0, 10))).toBe(10);
  });

  it("never evicts a locked path, and evicts it after unlock", () => {
    const tree = new RadixTree({ capacity: 100 });
    tree.insert(range(0, 10), 1);
    const { length, handle } = tree.lock(range(0, 6));
    expect(length).toBe(6);
    // the unlocked tail past the locked prefix is evictable, the prefix is not
    expect(tree.evict(100)).toEqual([{ path: range(0, 10), keep: 6 }]);
    expect(tree.evict(100)).toEqual([]);
    expect(tree.size).toBe(6);
    tree.unlock(handle);
    expect(tree.evict(100)).toEqual([{ path: range(0, 6), keep: 0 }]);
    expect(tree.size).toBe(0);
  });

  it("rounds a fractional request up to whole tokens and ignores non-positive ones", () => {
    const tree = new RadixTree({ capacity: 100 });
    tree.insert(range(0, 10), 1);
    expect(tree.evict(0)).toEqual([]);
    expect(tree.evict(Number.NaN)).toEqual([]);
    expect(tree.evict(2.5)).toEqual([{ path: range(0, 10), keep: 7 }]);
  });

  it("keeps the lazy LRU heap bounded under repeated hits, and still evicts in LRU order", () => {
    const tree = new RadixTree({ capacity: 1000 });
    tree.insert(range(0, 20), 0);
    tree.insert(range(100, 20), 1);
    for (let i = 0; i < 10_000; i++) tree.insert(range(0, 20), 2 + i); // full hits: recency moves only
    const lru = (tree as unknown as { lru: { size: number } }).lru;
    expect(lru.size).toBeLessThanOrEqual(2 * 3 + 1024);
    expect(tree.evict(20)).toEqual([{ path: range(100, 20), keep: 0 }]);
    expect(tree.evict(20)).toEqual([{ path: range(0, 20), keep: 0 }]);
  });

  it("refcounts locks: two locks on one path need two unlocks", () => {
    const tree = new RadixTree({ capacity: 100 });
    tree.insert(range(0, 4), 1);
    const a = tree.lock(range(0, 4)).handle;
    const b = tree.lock(range(0, 4)).handle;
    tree.unlock(a);
    expect(tree.evict(4)).toEqual([]);
    tree.unlock(b);
    expect(tree.evict(4)).toHaveLength(1);
  });

  it("capacity is the caller's to enforce: insert past it is stored and free() goes negative", () => {
    const tree = new RadixTree({ capacity: 8 });
    expect(tree.insert(range(0, 6), 1)).toBe(6);
    expect(tree.free()).toBe(2);
    // Algorithm 1: the caller evicts first, then inserts
    const need = 6 - tree.free();
    const runs = tree.evict(need);
    expect(runs.reduce((s, r) => s + r.path.length - r.keep, 0)).toBe(need);
    tree.insert(range(50, 6), 2);
    expect(tree.size).toBeLessThanOrEqual(8);
    tree.insert(range(90, 6), 3);
    expect(tree.free()).toBe(8 - 14);
    expect(() => new RadixTree({ capacity: -1 })).toThrow(RangeError);
  });

  it("resetTo mirrors an engine report and records it as a delta", () => {
    const tree = new RadixTree({ capacity: 1000 });
    tree.insert(range(0, 40), 1);
    tree.insert(range(500, 40), 2);
    const v = tree.version;
    const body = setOf(tree.snapshotBody().keys);
    tree.resetTo([range(0, 20), range(900, 33)], 3);
    expect(
      tree
        .sequences()
        .map((s) => keyOf(s))
        .sort(),
    ).toEqual([keyOf(range(0, 20)), keyOf(range(900, 33))].sort());
    expect(tree.size).toBe(53);
    expect(tree.version).toBe(v + 1);
    const d = tree.changesSince(v)!;
    for (const k of d.removed) body.delete(k);
    for (const k of d.added) body.add(k);
    expect(sameSet(body, setOf(tree.snapshotBody().keys))).toBe(true);
    tree.resetTo([range(0, 20), range(900, 33)], 4);
    expect(tree.version).toBe(v + 1); // nothing changed
  });

  it("forgets old versions once the log limit is hit, then asks for a full snapshot", () => {
    const tree = new RadixTree({ capacity: 1e6, logVersionLimit: 3 });
    for (let i = 0; i < 5; i++) tree.insert(range(i * 100, 32), i);
    expect(tree.version).toBe(5);
    expect(tree.changesSince(1)).toBeUndefined();
    expect(tree.changesSince(2)?.added.length).toBe(6);
    expect(tree.changesSince(5)?.added.length).toBe(0);
  });

  it("keeps block keys exact when eviction stops on a block boundary", () => {
    const tree = new RadixTree({ capacity: 1000 });
    tree.insert(range(0, 40), 1);
    expect(tree.snapshotBody().keys.length).toBe(2);
    expect(tree.evict(24)).toEqual([{ path: range(0, 40), keep: 16 }]);
    expect(Array.from(tree.snapshotBody().keys)).toEqual(blockKeys(range(0, 16)));
    expect(tree.changesSince(1)?.removed.length).toBe(1);
  });

  it("snapshotBody is immutable across later changes", () => {
    const tree = new RadixTree({ capacity: 1000 });
    tree.insert(range(0, 32), 1);
    const body = tree.snapshotBody();
    const copy = Array.from(body.keys);
    tree.insert(range(100, 32), 2);
    tree.evict(1000);
    expect(Array.from(body.keys)).toEqual(copy);
    expect(tree.snapshotBody().keys.length).toBe(0);
  });
});
