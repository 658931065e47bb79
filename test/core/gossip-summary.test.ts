/** Cache summaries (gossip/summary.ts): the wire form and its bounds, the tag, the index, the tree's keys. */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { blockKeys } from "../../src/core/block-hash.js";
import { decodeGossip, encodeGossip, GossipDecodeError } from "../../src/core/node/gossip/codec.js";
import { gossipSize } from "../../src/core/node/gossip/size.js";
import {
  checkpoints,
  type MeshGossip,
  SUMMARY_MAX_BLOCKS,
  SUMMARY_MAX_KEYS,
  SummaryIndex,
  summaryTag,
} from "../../src/core/node/gossip/summary.js";
import { RadixTree } from "../../src/core/radix-tree.js";
import { varint } from "./gossip-pair.js";

const LIMITS = { maxEntries: 100, maxStates: 10, maxSnapshotBytes: 1 << 20 };
const key = fc.integer({ min: 0, max: 2 ** 48 - 1 });

describe("summary wire form", () => {
  it("round-trips summaries and digests with a tag at exactly gossipSize bytes", () => {
    fc.assert(
      fc.property(
        fc.boolean(),
        fc.integer({ min: 0, max: 0xffff }),
        fc.option(fc.array(key, { maxLength: SUMMARY_MAX_KEYS }), { nil: undefined }),
        (want, tag, keys) => {
          const msgs: MeshGossip[] = [
            { type: "summary", want, tag, ...(keys === undefined ? {} : { keys }) },
            { type: "digest", entries: [{ owner: "n1", epoch: 3, version: 9 }], room: 2, summary: tag },
            { type: "digest", entries: [], room: 0, load: { queueDepth: 1, pushBackMs: 0 }, summary: tag },
          ];
          for (const msg of msgs) {
            const bytes = encodeGossip(msg);
            expect(bytes.length).toBe(gossipSize(msg));
            expect(decodeGossip(bytes, LIMITS)).toEqual(msg);
          }
        },
      ),
    );
  });

  it("writes keys as the snapshot codec does: 6 bytes, little-endian (the wire this release speaks)", () => {
    const key = 0x0605_0403_0201;
    const msg = { type: "summary" as const, want: false, tag: 1, keys: [key] };
    // type (5: summary), flags (body), tag, count, then the key.
    expect([...encodeGossip(msg)]).toEqual([5, 2, 1, 1, 1, 2, 3, 4, 5, 6]);
    expect(decodeGossip(Uint8Array.from([5, 2, 1, 1, 1, 2, 3, 4, 5, 6]), LIMITS)).toEqual(msg);
  });

  it("refuses more keys than SUMMARY_MAX_KEYS before reading them, unknown flags, bad tags, truncation", () => {
    const over = encodeGossip({ type: "summary", want: false, tag: 1, keys: [] });
    // type (5: summary), flags (body), tag, count: a count one over the bound, and no keys behind it.
    const tooMany = Uint8Array.from([5, 2, 1, ...varint(SUMMARY_MAX_KEYS + 1)]);
    expect(() => decodeGossip(tooMany, LIMITS)).toThrow(/summary keys/);
    expect(() => decodeGossip(Uint8Array.from([5, 4, 1]), LIMITS)).toThrow(/flags/);
    expect(() => decodeGossip(Uint8Array.from([5, 0, ...varint(0x10000)]), LIMITS)).toThrow(/tag/);
    expect(() => decodeGossip(Uint8Array.from([4, 0, ...varint(0x10000), 0]), LIMITS)).toThrow(/tag/);
    const body = encodeGossip({ type: "summary", want: true, tag: 7, keys: [1, 2, 3] });
    expect(() => decodeGossip(body.subarray(0, body.length - 1), LIMITS)).toThrow(GossipDecodeError);
    expect(() => decodeGossip(Uint8Array.from([...over, 0]), LIMITS)).toThrow(/trailing/);
  });
});

describe("summary tag and index", () => {
  it("the tag depends on the set, not its order", () => {
    fc.assert(
      fc.property(fc.uniqueArray(key, { maxLength: 40 }), (keys) => {
        expect(summaryTag([...keys].reverse())).toBe(summaryTag(keys));
        expect(summaryTag(keys)).toBeLessThanOrEqual(0xffff);
      }),
    );
    expect(summaryTag([1, 2])).not.toBe(summaryTag([1, 3]));
  });

  it("maps keys to members, replaces a member's summary, forgets it, and holds at most maxMembers", () => {
    const idx = new SummaryIndex(2);
    idx.set("a", 1, [10, 11]);
    idx.set("b", 2, [11]);
    expect([...idx.holders(11)].sort()).toEqual(["a", "b"]);
    expect(idx.wants("a", 1)).toBe(false);
    expect(idx.wants("a", 5)).toBe(true);
    // Full: a third member is neither wanted nor learnt.
    expect(idx.wants("c", 3)).toBe(false);
    idx.set("c", 3, [10]);
    expect(idx.holders(10)).toEqual(["a"]);
    idx.set("a", 4, [12]);
    expect(idx.holders(10)).toEqual([]);
    expect(idx.holders(11)).toEqual(["b"]);
    idx.remove("b");
    expect(idx.holders(11)).toEqual([]);
    expect(idx.size).toBe(1);
  });
});

describe("RadixTree.summaryKeys", () => {
  const run = (n: number, base: number) => Array.from({ length: n }, (_, i) => base + i);

  it("lists blocks 1, 2, 4, … of each first block's unbranched path, and stops where it branches", () => {
    const tree = new RadixTree({ capacity: 100_000 });
    // Two prompts sharing 10 blocks, then apart; a third with another first block, 5 blocks long.
    const shared = run(160, 1);
    const a = Uint32Array.from([...shared, ...run(64, 1_000)]);
    const b = Uint32Array.from([...shared, ...run(64, 2_000)]);
    const c = Uint32Array.from(run(80, 5_000));
    for (const t of [a, b, c]) tree.insert(t, 0);
    const keys = new Set(tree.summaryKeys(SUMMARY_MAX_KEYS, SUMMARY_MAX_BLOCKS));
    const ka = blockKeys(a);
    const kc = blockKeys(c);
    expect(keys).toEqual(new Set([ka[0], ka[1], ka[3], ka[7], kc[0], kc[1], kc[3]]));
    // A request matching the shared part finds its deepest listed checkpoint first.
    const deepest = checkpoints(blockKeys(a)).find(([, k]) => keys.has(k));
    expect(deepest?.[0]).toBe(8);
    expect(tree.summaryKeys(3, SUMMARY_MAX_BLOCKS)).toHaveLength(3);
  });
});
