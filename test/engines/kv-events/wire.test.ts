/**
 * The KV-event decoder against the bytes msgspec writes for vLLM's and SGLang's structs (built by the
 * publisher test double's encoder, plus hand-assembled golden bytes), and against malformed input.
 */
import fc from "fast-check";
import { Packr } from "msgpackr";
import { describe, expect, test } from "vitest";
import {
  decodeSequence,
  END_OF_REPLAY,
  encodeSequence,
} from "../../../src/engines/kv-events/sequence-frame.js";
import { decodeBatch } from "../../../src/engines/kv-events/wire.js";
import { DEFAULT_WIRE_LIMITS, KvWireError } from "../../../src/engines/kv-events/wire-types.js";
import { type DoubleEvent, encodeBatch, F64, msgpack, type Style } from "./publisher-double.js";

const hex = (s: string) => Uint8Array.from(Buffer.from(s.replace(/\s+/g, ""), "hex"));

describe("golden bytes", () => {
  test("a vLLM batch with positional events (array_like structs)", () => {
    // [1700000000.5, [["BlockStored", [1], nil, [5, 6], 2, nil, "GPU", nil]], 0]
    const bytes = hex(`
      93 cb 41d954fc40200000
      91 98 ab ${Buffer.from("BlockStored").toString("hex")}
      91 01  c0  92 05 06  02  c0  a3 ${Buffer.from("GPU").toString("hex")}  c0
      00`);
    expect(decodeBatch(bytes)).toEqual({
      ts: 1700000000.5,
      dataParallelRank: 0,
      events: [
        {
          type: "BlockStored",
          hashes: ["i:1"],
          parent: null,
          tokens: Uint32Array.from([5, 6]),
          blockSize: 2,
          medium: "GPU",
          namespaced: false,
          blockNamespaced: null,
          group: null,
        },
      ],
    });
  });

  test("a vLLM batch with tagged-map events and a u64 hash", () => {
    // [1.5, [{"type": "BlockRemoved", "block_hashes": [2^64-1], "medium": "GPU"}]]
    const str = (s: string) => `${(0xa0 | s.length).toString(16)} ${Buffer.from(s).toString("hex")}`;
    const bytes = hex(`
      92 cb 3ff8000000000000
      91 83 ${str("type")} ${str("BlockRemoved")}
      ${str("block_hashes")} 91 cf ffffffffffffffff
      ${str("medium")} ${str("GPU")}`);
    const batch = decodeBatch(bytes);
    expect(batch.dataParallelRank).toBeNull();
    expect(batch.events).toEqual([
      {
        type: "BlockRemoved",
        hashes: ["i:18446744073709551615"],
        medium: "GPU",
        group: null,
        remainingCopies: null,
      },
    ]);
  });

  test("sequence frames: 8 bytes big-endian, −1 only as the replay end marker", () => {
    expect(decodeSequence(hex("0000000000000102"))).toBe(258);
    expect(decodeSequence(hex("ffffffffffffffff"), true)).toBe(END_OF_REPLAY);
    expect(() => decodeSequence(hex("ffffffffffffffff"))).toThrow(KvWireError);
    expect(() => decodeSequence(hex("0102"))).toThrow(/8/);
    expect(Buffer.from(encodeSequence(258)).toString("hex")).toBe("0000000000000102");
  });
});

const stored: DoubleEvent = {
  type: "BlockStored",
  hashes: [11n, 12n],
  parent: 10,
  tokens: [1, 2, 3, 4],
  blockSize: 2,
};
const removed: DoubleEvent = { type: "BlockRemoved", hashes: [12n] };

describe.each<Style>(["vllm-array", "vllm-map", "vllm-map-batch", "sglang-array", "sglang-map"])(
  "the %s encoding",
  (style) => {
    test("stores, removals and a clear decode to the same events", () => {
      const batch = decodeBatch(
        encodeBatch(style, [stored, removed, { type: "AllBlocksCleared" }], 12.25, 3),
      );
      expect(batch.ts).toBe(12.25);
      expect(batch.dataParallelRank).toBe(3);
      expect(batch.events).toHaveLength(3);
      const [s, r, c] = batch.events;
      expect(s).toMatchObject({
        type: "BlockStored",
        hashes: ["i:11", "i:12"],
        parent: "i:10",
        tokens: Uint32Array.from([1, 2, 3, 4]),
        blockSize: 2,
        namespaced: false,
      });
      expect(s?.type === "BlockStored" && s.medium).toBe("GPU");
      expect(r).toMatchObject({ type: "BlockRemoved", hashes: ["i:12"] });
      expect(c).toEqual({ type: "AllBlocksCleared" });
    });
  },
);

describe("field semantics", () => {
  test("hashes: signed (SGLang), u64, and bytes (vLLM sha256) all become distinct keys", () => {
    const sha = new Uint8Array(32).fill(0xab);
    const b = decodeBatch(
      encodeBatch(
        "vllm-map",
        [
          {
            type: "BlockStored",
            hashes: [-6650323075460941099n, 2n ** 63n, sha],
            parent: null,
            tokens: [1, 2, 3],
            blockSize: 1,
          },
        ],
        0,
        0,
      ),
    );
    const ev = b.events[0]!;
    expect(ev.type === "BlockStored" && ev.hashes).toEqual([
      "i:-6650323075460941099",
      "i:9223372036854775808",
      `b:${"ab".repeat(32)}`,
    ]);
  });

  test("a LoRA name and a first-block cache salt name the namespace; other extra keys hide the blocks", () => {
    const decoded = (e: DoubleEvent, style: Style = "vllm-array") => {
      const ev = decodeBatch(encodeBatch(style, [e], 0, 0)).events[0]!;
      if (ev.type !== "BlockStored") throw new Error("not a BlockStored");
      return ev;
    };
    const ns = (e: DoubleEvent, style: Style = "vllm-array") => {
      const ev = decoded(e, style);
      return ev.namespaced || (ev.blockNamespaced ?? []).some(Boolean);
    };
    const base = { type: "BlockStored" as const, hashes: [1], parent: null, tokens: [1, 2], blockSize: 2 };
    expect(ns(base)).toBe(false);
    expect(decoded(base).namespace).toBeUndefined();
    expect(ns({ ...base, extraKeys: [null] })).toBe(false);
    // vLLM's extra keys: the LoRA name on every block, then the salt on the sequence's first block.
    const lora = decoded({ ...base, loraName: "adapter-a", extraKeys: [["adapter-a"]] });
    expect(lora).toMatchObject({ namespaced: false, namespace: { adapter: "adapter-a" } });
    const tenant = decoded({ ...base, extraKeys: [["salt-of-tenant-a"]] }, "vllm-map");
    expect(tenant).toMatchObject({ namespaced: false, namespace: { cacheSalt: "salt-of-tenant-a" } });
    expect(tenant.blockNamespaced).toEqual([false]);
    const both = decoded({
      ...base,
      hashes: [1, 2],
      tokens: [1, 2, 3, 4],
      loraName: "a",
      extraKeys: [["a", "t"], ["a"]],
    });
    expect(both).toMatchObject({
      namespace: { adapter: "a", cacheSalt: "t" },
      blockNamespaced: [false, false],
    });
    // A salt-looking key on a block that is not a sequence's first keys it by something unnamed.
    expect(ns({ ...base, parent: 9, extraKeys: [["t"]] })).toBe(true);
    // An adapter id without its name (older vLLM) cannot be named: hidden.
    const idOnly = msgpack([new F64(1), [["BlockStored", [1], null, [1, 2], 2, 3, "GPU"]], null]);
    const ev0 = decodeBatch(idOnly).events[0]!;
    expect(ev0.type === "BlockStored" && ev0.namespaced).toBe(true);
    const perBlock = decodeBatch(
      encodeBatch(
        "vllm-map",
        [{ ...base, hashes: [1, 2], tokens: [1, 2, 3, 4], extraKeys: [null, [new Uint8Array([7])]] }],
        0,
        0,
      ),
    ).events[0]!;
    expect(perBlock).toMatchObject({ namespaced: false, blockNamespaced: [false, true] });
    // SGLang's positional extension at index 7 (its metadata, a map carrying the cache salt).
    const salted = msgpack([
      new F64(1),
      [["BlockStored", [1], null, [1, 2], 2, null, "GPU", new Map([["cache_salt", "t"]])]],
      null,
    ]);
    expect(decodeBatch(salted).events[0]).toMatchObject({ namespaced: false, namespace: { cacheSalt: "t" } });
    // Other metadata there may key the hashes by something unnamed.
    const other = msgpack([
      new F64(1),
      [["BlockStored", [1], null, [1, 2], 2, null, "GPU", new Map([["image", "t"]])]],
      null,
    ]);
    expect(decodeBatch(other).events[0]).toMatchObject({ namespaced: true });
  });

  test("group, medium (any case), bigram token pairs, remaining copy counts", () => {
    const b = decodeBatch(
      msgpack([
        new F64(1),
        [
          new Map<string, unknown>([
            ["type", "BlockStored"],
            ["block_hashes", [1]],
            ["parent_block_hash", null],
            [
              "token_ids",
              [
                [7, 8],
                [8, 9],
              ],
            ],
            ["block_size", 2],
            ["medium", "gpu"],
            ["group_idx", 1],
          ]),
          new Map<string, unknown>([
            ["type", "BlockRemoved"],
            ["block_hashes", [1, 2]],
            ["medium", "CPU"],
            ["remaining_copy_counts", [0, 2]],
          ]),
        ],
      ]),
    );
    expect(b.events[0]).toMatchObject({ medium: "GPU", group: 1, tokens: Uint32Array.from([7, 8]) });
    expect(b.events[1]).toMatchObject({ medium: "CPU", remainingCopies: [0, 2] });
  });
});

describe("malformed or oversized input is a KvWireError, never a crash", () => {
  const bad: [string, Uint8Array][] = [
    ["empty", new Uint8Array(0)],
    ["not msgpack (truncated array)", hex("93 cb 41")],
    ["a string batch", msgpack("hello")],
    ["a batch without events", msgpack([new F64(1)])],
    ["events not a list", msgpack([new F64(1), 5])],
    ["ts not a number", msgpack(["x", []])],
    ["an unknown event tag", msgpack([new F64(1), [["BlockExploded", [1]]]])],
    ["a positional BlockStored too short", msgpack([new F64(1), [["BlockStored", [1], null]]])],
    ["a token id above 2^32", msgpack([new F64(1), [["BlockStored", [1], null, [2 ** 33], 1, null]]])],
    ["a negative token id", msgpack([new F64(1), [["BlockStored", [1], null, [-1], 1, null]]])],
    ["a string hash", msgpack([new F64(1), [["BlockRemoved", ["abc"]]]])],
    ["a float hash", msgpack([new F64(1), [["BlockRemoved", [new F64(1.5)]]]])],
    ["a BlockStored with no hashes", msgpack([new F64(1), [["BlockStored", [], null, [1], 1, null]]])],
    ["a rank out of range", msgpack([new F64(1), [], -3])],
    [
      "remaining_copy_counts of the wrong length",
      msgpack([
        new F64(1),
        [
          new Map<string, unknown>([
            ["type", "BlockRemoved"],
            ["block_hashes", [1, 2]],
            ["remaining_copy_counts", [1]],
          ]),
        ],
      ]),
    ],
    [
      "a msgpack timestamp where a hash goes",
      hex("92 cb 3ff0000000000000 91 92 ac 426c6f636b52656d6f766564 91 d6 ff 00000001"),
    ],
    ["deep nesting", Uint8Array.from([...Array(20_000).fill(0x91), 0xc0])],
  ];
  test.each(bad)("%s", (_name, bytes) => {
    expect(() => decodeBatch(bytes)).toThrow(KvWireError);
  });

  test("the decoder still works after every failure", () => {
    const valid = encodeBatch("vllm-array", [stored], 1, 0);
    for (const [, bytes] of bad) {
      expect(() => decodeBatch(bytes)).toThrow(KvWireError);
      expect(decodeBatch(valid).events).toHaveLength(1);
    }
  });

  test("size and count caps", () => {
    const limits = {
      ...DEFAULT_WIRE_LIMITS,
      maxPayloadBytes: 1000,
      maxEventsPerBatch: 2,
      maxTokensPerEvent: 8,
    };
    const many = encodeBatch("vllm-array", Array(3).fill({ type: "AllBlocksCleared" }), 0, 0);
    expect(() => decodeBatch(many, limits)).toThrow(/3 events/);
    const long = encodeBatch(
      "vllm-array",
      [{ type: "BlockStored", hashes: [1], parent: null, tokens: Array(9).fill(1), blockSize: 9 }],
      0,
      0,
    );
    expect(() => decodeBatch(long, limits)).toThrow(/9 tokens/);
    expect(() => decodeBatch(new Uint8Array(1001).fill(0x90), limits)).toThrow(/exceeds/);
  });

  test("msgpackr's own extensions (records, structured clones) are refused", () => {
    const withRecords = new Packr({ useRecords: true }).pack([1.5, [{ type: "AllBlocksCleared" }]]);
    expect(() => decodeBatch(withRecords)).toThrow(KvWireError);
    const cloned = new Packr({ structuredClone: true }).pack([1.5, [new Set([1])]]);
    expect(() => decodeBatch(cloned)).toThrow(KvWireError);
  });

  test("random bytes: a batch or a KvWireError, nothing else", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => {
        try {
          decodeBatch(bytes);
        } catch (e) {
          if (!(e instanceof KvWireError)) throw e;
        }
      }),
      { numRuns: 2000 },
    );
  });

  test("mutated valid batches: a batch or a KvWireError, nothing else", () => {
    const valid = encodeBatch("vllm-map", [stored, removed], 1, 0);
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.nat(valid.length - 1), fc.integer({ min: 0, max: 255 })), { maxLength: 6 }),
        (edits) => {
          const b = valid.slice();
          for (const [i, v] of edits) b[i] = v;
          try {
            decodeBatch(b);
          } catch (e) {
            if (!(e instanceof KvWireError)) throw e;
          }
        },
      ),
      { numRuns: 2000 },
    );
  });
});
