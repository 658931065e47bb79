/**
 * The mirror's reachable counts are kept as blocks come and go (a scrape walks nothing): after any
 * sequence of events they equal a full walk of what a prompt can reach (`sequences`, one per leaf).
 */
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { KvCacheMirror } from "../../../src/engines/kv-events/mirror.js";
import type { KvEvent } from "../../../src/engines/kv-events/wire-types.js";

const SIZE = 2;

/** Hash h's block: few distinct token runs, so blocks of other hashes share a parent's key too. */
const tokensOf = (h: number) => [h % 3, 7];

/** Every block a prompt reaches is one distinct whole-block prefix of the sequences (one block size). */
function walked(m: KvCacheMirror): { blocks: number; tokens: number } {
  const prefixes = new Set<string>();
  for (const seq of m.sequences())
    for (let n = SIZE; n <= seq.length; n += SIZE) prefixes.add(Array.from(seq.subarray(0, n)).join(","));
  return { blocks: prefixes.size, tokens: prefixes.size * SIZE };
}

const hash = fc.integer({ min: 1, max: 12 });
type Step =
  | { kind: "store"; parent: number | null; hashes: number[] }
  | { kind: "remove"; hashes: number[]; remaining: number | null }
  | { kind: "cleared" }
  | { kind: "forget" }
  | { kind: "clear" };
const step: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant("store" as const),
      parent: fc.option(hash),
      hashes: fc.array(hash, { minLength: 1, maxLength: 4 }),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant("remove" as const),
      hashes: fc.array(hash, { minLength: 1, maxLength: 3 }),
      remaining: fc.option(fc.integer({ min: 0, max: 2 })),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ kind: "cleared" as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: "forget" as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: "clear" as const }) },
);

function event(s: Step): KvEvent | undefined {
  if (s.kind === "store")
    return {
      type: "BlockStored",
      hashes: s.hashes.map(String),
      parent: s.parent === null ? null : String(s.parent),
      tokens: Uint32Array.from(s.hashes.flatMap(tokensOf)),
      blockSize: SIZE,
      medium: null,
      namespaced: false,
      blockNamespaced: null,
      group: null,
    };
  if (s.kind === "remove")
    return {
      type: "BlockRemoved",
      hashes: s.hashes.map(String),
      medium: null,
      group: null,
      remainingCopies: s.remaining === null ? null : s.hashes.map(() => s.remaining!),
    };
  if (s.kind === "cleared") return { type: "AllBlocksCleared" };
  return undefined;
}

describe("the mirror's reachable counts", () => {
  test("equal a full walk after any sequence of stores, removals and clears", () => {
    fc.assert(
      fc.property(fc.array(step, { maxLength: 60 }), (steps) => {
        const m = new KvCacheMirror();
        for (const s of steps) {
          const ev = event(s);
          if (ev) m.apply({ ts: 0, events: [ev], dataParallelRank: null });
          else if (s.kind === "forget") m.forget("test");
          else m.clear();
          const { reachableBlocks, reachableTokens, blocks } = m.stats();
          expect({ blocks: reachableBlocks, tokens: reachableTokens }).toEqual(walked(m));
          expect(reachableBlocks).toBeLessThanOrEqual(blocks);
        }
      }),
      { numRuns: 500 },
    );
  });

  test("a block whose parent comes back is reachable again, with what was stored below it", () => {
    const m = new KvCacheMirror();
    const store = (parent: number | null, ...hashes: number[]) =>
      m.apply({ ts: 0, events: [event({ kind: "store", parent, hashes })!], dataParallelRank: null });
    store(null, 1, 2, 3);
    expect(m.stats()).toMatchObject({ blocks: 3, reachableBlocks: 3, reachableTokens: 6 });
    m.apply({
      ts: 0,
      events: [event({ kind: "remove", hashes: [1], remaining: null })!],
      dataParallelRank: null,
    });
    expect(m.stats()).toMatchObject({ blocks: 2, reachableBlocks: 0, reachableTokens: 0 });
    store(2, 4);
    expect(m.stats()).toMatchObject({ blocks: 3, reachableBlocks: 0 });
    store(null, 1);
    expect(m.stats()).toMatchObject({ blocks: 4, reachableBlocks: 4, reachableTokens: 8 });
  });
});
