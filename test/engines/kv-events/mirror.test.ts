import { describe, expect, test } from "vitest";
import { keyTokens, NAMESPACE_TOKENS } from "../../../src/core/namespace.js";
import { RadixTree } from "../../../src/core/radix-tree.js";
import { KvCacheMirror, OLD_SGLANG_ROOT_HASH } from "../../../src/engines/kv-events/mirror.js";
import { decodeBatch } from "../../../src/engines/kv-events/wire.js";
import type {
  BlockRemoved,
  BlockStored,
  KvEvent,
  KvEventBatch,
} from "../../../src/engines/kv-events/wire-types.js";
import { type DoubleEvent, encodeBatch, F64, msgpack } from "./publisher-double.js";

const T = (...t: number[]) => Uint32Array.from(t);
const batch = (events: KvEvent[], rank: number | null = 0): KvEventBatch => ({
  ts: 0,
  events,
  dataParallelRank: rank,
});
const stored = (
  hashes: string[],
  parent: string | null,
  tokens: number[],
  extra: Partial<BlockStored> = {},
): BlockStored => ({
  type: "BlockStored",
  hashes,
  parent,
  tokens: T(...tokens),
  blockSize: tokens.length / hashes.length,
  medium: "GPU",
  namespaced: false,
  blockNamespaced: null,
  group: null,
  ...extra,
});
const removed = (hashes: string[], extra: Partial<BlockRemoved> = {}): BlockRemoved => ({
  type: "BlockRemoved",
  hashes,
  medium: "GPU",
  group: null,
  remainingCopies: null,
  ...extra,
});

describe("mirror rules", () => {
  test("a chain of blocks is a prefix; matches stop at whole blocks", () => {
    const m = new KvCacheMirror();
    m.apply(batch([stored(["a", "b"], null, [1, 2, 3, 4]), stored(["c"], "b", [5, 6])]));
    expect(m.match(T(1, 2, 3, 4, 5, 6, 7))).toBe(6);
    expect(m.match(T(1, 2, 3, 9))).toBe(2);
    expect(m.match(T(1, 2, 3))).toBe(2);
    expect(m.match(T(9))).toBe(0);
    expect(m.sequences()).toEqual([T(1, 2, 3, 4, 5, 6)]);
    expect(m.degraded).toBeUndefined();
  });

  test("removing a block makes its descendants unreachable; storing it again reconnects them", () => {
    const m = new KvCacheMirror();
    m.apply(batch([stored(["a", "b", "c"], null, [1, 2, 3, 4, 5, 6])]));
    m.apply(batch([removed(["b"])]));
    expect(m.match(T(1, 2, 3, 4, 5, 6))).toBe(2);
    expect(m.stats()).toMatchObject({ blocks: 2, reachableBlocks: 1 });
    m.apply(batch([stored(["b"], "a", [3, 4])]));
    expect(m.match(T(1, 2, 3, 4, 5, 6))).toBe(6);
  });

  test("a block stored under a parent never seen: held, unreachable, and the mirror degraded", () => {
    const m = new KvCacheMirror();
    m.apply(batch([stored(["c"], "p", [5, 6])]));
    // The engine reuses c only through p, whose tokens the mirror does not know: no prefix claimed,
    // and the mirror, missing p, is not exact.
    expect(m.degraded).toMatch(/stored under block p, never stored/);
    expect(m.stats()).toMatchObject({ blocks: 1, reachableBlocks: 0 });
    expect(m.sequences()).toEqual([]);
    // Once p's chain is stored, c is reachable (vLLM looks blocks up by their chained hash).
    m.apply(batch([stored(["p"], null, [3, 4])]));
    expect(m.match(T(3, 4, 5, 6))).toBe(4);
    // A first block, and one under a block held, degrade nothing.
    const exact = new KvCacheMirror();
    exact.apply(batch([stored(["a"], null, [1, 2]), stored(["b"], "a", [3, 4])]));
    expect(exact.degraded).toBeUndefined();
  });

  test("vLLM's sliding-window and Mamba groups name parents they dropped: no degradation there", () => {
    // vLLM names the request's previous hash as parent even where that group freed the block (out of
    // the window) or never stored it (a null block): expected, not a missed batch.
    const ev = (kind: string | null, window: number | null) =>
      decodeBatch(
        msgpack([
          new F64(1),
          [["BlockStored", [2], 1, [3, 4], 2, null, "GPU", null, null, 0, kind, window]],
          0,
        ]),
      );
    for (const [kind, window] of [
      ["sliding_window", 4],
      ["mamba", null],
      [null, 4],
    ] as const) {
      const m = new KvCacheMirror();
      m.apply(ev(kind, window));
      expect(m.degraded).toBeUndefined();
      expect(m.stats()).toMatchObject({ blocks: 1, reachableBlocks: 0 });
    }
    for (const kind of ["full_attention", "mla_attention", null]) {
      const m = new KvCacheMirror();
      m.apply(ev(kind, null));
      expect(m.degraded).toMatch(/stored under block i:1, never stored/);
    }
  });

  test("copies: a hash stored twice stays until removed twice, or until no copy remains", () => {
    const m = new KvCacheMirror();
    m.apply(batch([stored(["a"], null, [1, 2]), stored(["a"], null, [1, 2])]));
    m.apply(batch([removed(["a"])]));
    expect(m.match(T(1, 2))).toBe(2);
    m.apply(batch([removed(["a"])]));
    expect(m.match(T(1, 2))).toBe(0);
    m.apply(batch([stored(["a"], null, [1, 2]), stored(["a"], null, [1, 2])]));
    m.apply(batch([removed(["a"], { remainingCopies: [0] })]));
    expect(m.match(T(1, 2))).toBe(0);
    expect(m.degraded).toBeUndefined();
  });

  test("AllBlocksCleared empties the mirror and makes it exact again", () => {
    const m = new KvCacheMirror();
    m.apply(batch([stored(["a"], null, [1, 2])]));
    m.markDegraded("lost batches");
    expect(m.degraded).toBe("lost batches");
    m.apply(batch([{ type: "AllBlocksCleared" }, stored(["b"], null, [3, 4])]));
    expect(m.degraded).toBeUndefined();
    expect(m.sequences()).toEqual([T(3, 4)]);
    expect(m.counters.cleared).toBe(1);
  });

  test("forget drops every block held and degrades; blocks stored since are kept until a clear", () => {
    const m = new KvCacheMirror();
    m.apply(batch([stored(["a", "b"], null, [1, 2, 3, 4])]));
    let changes = 0;
    m.onChange(() => changes++);
    const v = m.version;
    m.forget("lost batches 3–5");
    expect(changes).toBe(1);
    expect(m.version).toBeGreaterThan(v);
    expect(m.degraded).toBe("lost batches 3–5");
    expect(m.sequences()).toEqual([]);
    expect(m.stats()).toMatchObject({ blocks: 0, reachableBlocks: 0 });
    expect(m.counters.forgotten).toBe(2);
    // A block chained to a forgotten one is held but unreachable: its parent is not known held.
    m.apply(batch([stored(["c"], "b", [5, 6]), stored(["x"], null, [7, 8])]));
    expect(m.match(T(1, 2, 3, 4, 5, 6))).toBe(0);
    expect(m.sequences()).toEqual([T(7, 8)]);
    // The first reason stays; a removal of a forgotten block only counts.
    m.forget("lost batches 9–9");
    expect(m.degraded).toBe("lost batches 3–5");
    expect(m.counters.forgotten).toBe(4);
    m.apply(batch([removed(["a"])]));
    expect(m.counters.unknownRemovals).toBe(1);
    m.apply(batch([{ type: "AllBlocksCleared" }]));
    expect(m.degraded).toBeUndefined();
  });

  test("other media and groups are counted, not mirrored", () => {
    const m = new KvCacheMirror({ rank: 1 });
    m.apply(
      batch(
        [
          stored(["b"], null, [1, 2], { medium: "CPU" }),
          stored(["c"], null, [1, 2], { group: 1 }),
          removed(["b"], { medium: "CPU" }),
        ],
        1,
      ),
    );
    expect(m.match(T(1, 2))).toBe(0);
    expect(m.counters).toMatchObject({ otherRank: 0, otherMedium: 2, otherGroup: 1 });
    expect(m.degraded).toBeUndefined();
  });

  test("another rank's batch is not mirrored, and says the stream is not this rank's", () => {
    // Each rank publishes on its own ports: the blocks of the rank followed never come on this
    // stream, so an empty mirror claiming to be exact would hide every block the rank holds.
    const m = new KvCacheMirror({ rank: 1 });
    expect(m.apply(batch([stored(["a"], null, [1, 2])], 0))).toBe(false);
    expect(m.match(T(1, 2))).toBe(0);
    expect(m.counters.otherRank).toBe(1);
    expect(m.degraded).toMatch(/rank 0 .*rank 1/);
  });

  test("a batch naming no rank is the stream's own, whatever rank is followed", () => {
    // SGLang versions that publish attention-DP rank r on ports + r but leave the rank out of the
    // batch: refusing those batches left the mirror empty and degraded for good.
    const m = new KvCacheMirror({ rank: 2 });
    expect(m.apply(batch([stored(["a"], null, [1, 2])], null))).toBe(true);
    expect(m.match(T(1, 2))).toBe(2);
    expect(m.counters.otherRank).toBe(0);
    expect(m.degraded).toBeUndefined();
  });

  test("namespaced blocks (LoRA, cache salt) are held but never match a plain prompt", () => {
    const m = new KvCacheMirror();
    m.apply(
      batch([stored(["s1", "s2"], null, [1, 2, 3, 4], { namespaced: true }), stored(["p1"], null, [1, 2])]),
    );
    expect(m.match(T(1, 2, 3, 4))).toBe(2);
    // A plain-looking block chained under a salted one is salted too: unreachable from the plain root.
    m.apply(batch([stored(["x"], "s2", [5, 6])]));
    expect(m.match(T(1, 2, 3, 4, 5, 6))).toBe(2);
    m.apply(batch([removed(["s1", "s2"])]));
    expect(m.degraded).toBeUndefined();
    expect(m.stats().blocks).toBe(2);
  });

  test("per-block extra keys (vLLM): a block before an image or salt matches, the ones from it on do not", () => {
    const m = new KvCacheMirror();
    m.apply(
      batch([stored(["a", "img", "c"], null, [1, 2, 3, 4, 5, 6], { blockNamespaced: [false, true, false] })]),
    );
    expect(m.match(T(1, 2, 3, 4, 5, 6))).toBe(2);
    expect(m.stats()).toMatchObject({ blocks: 3, reachableBlocks: 1 });
  });

  test("older SGLang's root parent hash counts as a sequence start; variable block sizes match", () => {
    const m = new KvCacheMirror();
    m.apply(
      batch([
        stored(["a"], OLD_SGLANG_ROOT_HASH, [1, 2, 3]),
        stored(["b"], "a", [4]),
        stored(["c"], "a", [4, 5, 6]),
      ]),
    );
    expect(m.match(T(1, 2, 3, 4, 5, 6, 7))).toBe(6);
    expect(m.match(T(1, 2, 3, 4, 9))).toBe(4);
    expect(
      m
        .sequences()
        .map((s) => Array.from(s))
        .sort(),
    ).toEqual([
      [1, 2, 3, 4],
      [1, 2, 3, 4, 5, 6],
    ]);
  });

  test("inconsistencies degrade: an unknown removal, a conflicting store, a bad token count, the block cap", () => {
    const unknown = new KvCacheMirror();
    unknown.apply(batch([removed(["zz"])]));
    expect(unknown.degraded).toMatch(/never stored/);
    const conflict = new KvCacheMirror();
    conflict.apply(batch([stored(["a"], null, [1, 2]), stored(["a"], null, [3, 4])]));
    expect(conflict.degraded).toMatch(/other contents/);
    expect(conflict.match(T(1, 2))).toBe(2);
    const odd = new KvCacheMirror();
    odd.apply(batch([stored(["a", "b"], null, [1, 2, 3])]));
    expect(odd.degraded).toMatch(/3 tokens for 2 blocks/);
    const capped = new KvCacheMirror({ maxBlocks: 2 });
    capped.apply(batch([stored(["a", "b", "c"], null, [1, 2, 3])]));
    expect(capped.degraded).toMatch(/more than 2 blocks/);
    expect(capped.match(T(1, 2, 3))).toBe(2);
  });

  test("deep chains (one token per block) work without recursion", () => {
    const m = new KvCacheMirror();
    const n = 30_000;
    const events: BlockStored[] = [];
    for (let i = 0; i < n; i++) events.push(stored([`h${i}`], i === 0 ? null : `h${i - 1}`, [i % 7]));
    m.apply(batch(events));
    const prompt = Uint32Array.from({ length: n }, (_, i) => i % 7);
    expect(m.match(prompt)).toBe(n);
    expect(m.sequences()[0]).toEqual(prompt);
    expect(m.stats().reachableTokens).toBe(n);
  });
});

describe("namespaced chains (cache salt, LoRA adapter), from the publisher test double's wire bytes", () => {
  const BS = 4;
  const prompt = Array.from({ length: 3 * BS }, (_, i) => i + 1);
  const chain = (first: number, extra?: (n: number) => unknown[] | null, loraName?: string): DoubleEvent => ({
    type: "BlockStored",
    hashes: [first, first + 1, first + 2],
    parent: null,
    tokens: prompt,
    blockSize: BS,
    ...(loraName !== undefined ? { loraName } : {}),
    ...(extra ? { extraKeys: [0, 1, 2].map(extra) } : {}),
  });
  // vLLM's extra keys: the LoRA name on every block, the cache salt on the sequence's first block only.
  const salted = chain(10, (i) => (i === 0 ? ["tenant-a"] : null));
  const plain = chain(20);
  const lora = chain(30, () => ["adapter-x"], "adapter-x");
  const mirrored = (events: DoubleEvent[]) => {
    const m = new KvCacheMirror();
    m.apply(decodeBatch(encodeBatch("vllm-array", events, 0, 0)));
    // The node's tree as the engine-managed node builds it: the mirror's sequences.
    const tree = new RadixTree({ capacity: 1 << 20 }, false);
    for (const s of m.sequences()) tree.insert(s, 1);
    return { m, tree };
  };
  const tokens = Uint32Array.from(prompt);

  test("a salted chain matches only a request with that salt; a plain chain only a plain request", () => {
    const { m, tree } = mirrored([salted]);
    expect(m.sequences()).toEqual([keyTokens({ tokens, cacheSalt: "tenant-a" })]);
    expect(tree.match(tokens)).toBe(0);
    expect(tree.match(keyTokens({ tokens, cacheSalt: "tenant-b" }))).toBe(0);
    expect(tree.match(keyTokens({ tokens, cacheSalt: "tenant-a" }))).toBe(NAMESPACE_TOKENS + prompt.length);
    expect(m.match(tokens)).toBe(0);
    expect(m.match(tokens, { cacheSalt: "tenant-a" })).toBe(prompt.length);

    const onlyPlain = mirrored([plain]).tree;
    expect(onlyPlain.match(tokens)).toBe(prompt.length);
    expect(onlyPlain.match(keyTokens({ tokens, cacheSalt: "tenant-a" }))).toBe(0);
  });

  test("salted, plain and adapter chains of the same tokens stay apart side by side", () => {
    const { m, tree } = mirrored([salted, plain, lora]);
    const seqs = m.sequences().map((s) => Array.from(s).join(","));
    expect(seqs.sort()).toEqual(
      [tokens, keyTokens({ tokens, cacheSalt: "tenant-a" }), keyTokens({ tokens, adapter: "adapter-x" })]
        .map((s) => Array.from(s).join(","))
        .sort(),
    );
    expect(tree.match(keyTokens({ tokens, adapter: "adapter-x" }))).toBe(NAMESPACE_TOKENS + prompt.length);
    expect(tree.match(keyTokens({ tokens, adapter: "adapter-x", cacheSalt: "tenant-a" }))).toBe(0);
    expect(m.stats().reachableBlocks).toBe(9);
    // A continuation stored later chains to the salted chain and stays in its namespace.
    m.apply(
      decodeBatch(
        encodeBatch(
          "vllm-array",
          [{ type: "BlockStored", hashes: [13], parent: 12, tokens: [7, 7, 7, 7], blockSize: BS }],
          0,
          0,
        ),
      ),
    );
    const longer = Uint32Array.from([...prompt, 7, 7, 7, 7]);
    expect(m.match(longer, { cacheSalt: "tenant-a" })).toBe(longer.length);
    expect(m.match(longer)).toBe(prompt.length);
    // Removing the salted chain's first block leaves its namespace root empty: nothing is reported.
    m.apply(decodeBatch(encodeBatch("vllm-array", [{ type: "BlockRemoved", hashes: [10] }], 0, 0)));
    expect(m.match(tokens, { cacheSalt: "tenant-a" })).toBe(0);
    expect(m.sequences()).toHaveLength(2);
    expect(m.degraded).toBeUndefined();
  });
});

describe("SGLang's cache salt, in each layout it has published", () => {
  const salt = new Map([["cache_salt", "tenant-a"]]);
  const marker = [["dynamo-cache-salt:tenant-a"]];
  const nulls = (n: number) => Array.from({ length: n }, () => null);
  // A salted chain's first block (parent nil: its hash is seeded by the salt) and a later one.
  const layouts: Record<string, (h: number, parent: number | null, tokens: number[]) => unknown> = {
    "metadata after medium": (h, p, t) => ["BlockStored", [h], p, t, 2, null, "GPU", salt],
    "salt in extra_keys, metadata past vLLM's fields": (h, p, t) => [
      "BlockStored",
      [h],
      p,
      t,
      2,
      null,
      "GPU",
      null,
      marker,
      ...nulls(5),
      salt,
    ],
    "tagged map": (h, p, t) =>
      new Map<string, unknown>([
        ["type", "BlockStored"],
        ["block_hashes", [h]],
        ["parent_block_hash", p],
        ["token_ids", t],
        ["block_size", 2],
        ["lora_id", null],
        ["medium", "GPU"],
        ["metadata", salt],
      ]),
  };
  for (const [layout, ev] of Object.entries(layouts)) {
    test(`${layout}: the chain matches requests of that salt only`, () => {
      const m = new KvCacheMirror();
      m.apply(decodeBatch(msgpack([new F64(1), [ev(1, null, [1, 2]), ev(2, 1, [3, 4])], 0])));
      expect(m.match(T(1, 2, 3, 4, 5), { cacheSalt: "tenant-a" })).toBe(4);
      expect(m.match(T(1, 2, 3, 4, 5), { cacheSalt: "tenant-b" })).toBe(0);
      expect(m.match(T(1, 2, 3, 4, 5))).toBe(0);
      expect(m.degraded).toBeUndefined();
    });
  }

  test("unsalted blocks in the newest layout (trailing nil fields) match plain requests", () => {
    const m = new KvCacheMirror();
    const plain = ["BlockStored", [1], null, [1, 2], 2, null, "GPU", ...nulls(7)];
    m.apply(decodeBatch(msgpack([new F64(1), [plain], 0])));
    expect(m.match(T(1, 2, 3))).toBe(2);
  });
});
