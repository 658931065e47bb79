import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { BLOCK_SIZE, MAX_BLOCK_KEY } from "../../src/core/block-hash.js";
import { crc32 } from "../../src/core/crc32.js";
import { PeerIndex } from "../../src/core/peer-index.js";
import { RadixTree } from "../../src/core/radix-tree.js";
import { isNewer, type Snapshot, type SnapshotHeader } from "../../src/core/snapshot.js";
import {
  decodeSnapshot,
  encodedSize,
  encodeSnapshot,
  SnapshotDecodeError,
} from "../../src/core/snapshot-codec.js";

const utf8Len = (s: string): number => new TextEncoder().encode(s).length;

const arbHeader: fc.Arbitrary<SnapshotHeader> = fc.record({
  sender: fc
    .string({ unit: "grapheme", minLength: 1, maxLength: 12 })
    .filter((s) => utf8Len(s) >= 1 && utf8Len(s) <= 64),
  epoch: fc.maxSafeNat(),
  version: fc.maxSafeNat(),
  tokenCount: fc.maxSafeNat(),
  capacity: fc.maxSafeNat(),
  queueDepth: fc.nat(),
  pushBackMs: fc.nat(),
});
const arbKeys = fc
  .array(fc.integer({ min: 0, max: MAX_BLOCK_KEY }), { maxLength: 40 })
  .map((a) => Float64Array.from(a));

const arbSnapshot: fc.Arbitrary<Snapshot> = fc.oneof(
  fc
    .record({ h: arbHeader, keys: arbKeys })
    .map(({ h, keys }): Snapshot => ({ kind: "full", header: h, body: { blockSize: BLOCK_SIZE, keys } })),
  fc.record({ h: arbHeader, base: fc.maxSafeNat(), added: arbKeys, removed: arbKeys }).map(
    ({ h, base, added, removed }): Snapshot => ({
      kind: "delta",
      header: h,
      delta: { baseVersion: Math.min(base, h.version), version: h.version, added, removed },
    }),
  ),
  arbHeader.map((h): Snapshot => ({ kind: "heartbeat", header: h })),
);

/** Decodes; true if it threw SnapshotDecodeError, false if it returned; fails the test on any other throw. */
function rejects(bytes: Uint8Array): boolean {
  try {
    const s = decodeSnapshot(bytes);
    // whatever comes back must be well-formed
    expect(["full", "delta", "heartbeat"]).toContain(s.kind);
    expect(utf8Len(s.header.sender)).toBeLessThanOrEqual(64);
    for (const v of Object.values(s.header))
      if (typeof v === "number") expect(Number.isSafeInteger(v)).toBe(true);
    return false;
  } catch (e) {
    expect(e).toBeInstanceOf(SnapshotDecodeError);
    return true;
  }
}

function withCrc(bytes: Uint8Array): Uint8Array {
  const out = bytes.slice();
  if (out.length >= 4)
    new DataView(out.buffer).setUint32(out.length - 4, crc32(out, 0, out.length - 4), true);
  return out;
}

describe("snapshot codec", () => {
  it("round-trips every snapshot, and encodedSize is exact", () => {
    fc.assert(
      fc.property(arbSnapshot, (s) => {
        const bytes = encodeSnapshot(s);
        expect(encodedSize(s)).toBe(bytes.length);
        expect(decodeSnapshot(bytes)).toEqual(s);
      }),
      { numRuns: 1000 },
    );
  });

  it("random bytes only ever produce SnapshotDecodeError", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => {
        expect(rejects(bytes)).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });

  it("mutated frames (with and without a repaired checksum) only ever produce SnapshotDecodeError or a well-formed snapshot", () => {
    const mutation = fc.oneof(
      fc.record({ k: fc.constant("flip" as const), at: fc.nat(), bit: fc.nat({ max: 7 }) }),
      fc.record({ k: fc.constant("set" as const), at: fc.nat(), v: fc.nat({ max: 255 }) }),
      fc.record({ k: fc.constant("cut" as const), at: fc.nat() }),
      fc.record({
        k: fc.constant("insert" as const),
        at: fc.nat(),
        v: fc.uint8Array({ minLength: 1, maxLength: 9 }),
      }),
    );
    fc.assert(
      fc.property(
        arbSnapshot,
        fc.array(mutation, { minLength: 1, maxLength: 3 }),
        fc.boolean(),
        (s, muts, fix) => {
          let b = encodeSnapshot(s);
          for (const m of muts) {
            const at = m.at % (b.length + 1);
            if (m.k === "flip" && at < b.length) b[at]! ^= 1 << m.bit;
            else if (m.k === "set" && at < b.length) b[at] = m.v;
            else if (m.k === "cut") b = b.slice(0, at);
            else if (m.k === "insert") b = Uint8Array.from([...b.subarray(0, at), ...m.v, ...b.subarray(at)]);
          }
          rejects(fix ? withCrc(b) : b);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it("rejects with specific codes: magic, version, checksum, truncation, trailing bytes, limits", () => {
    const s: Snapshot = {
      kind: "full",
      header: {
        sender: "n1",
        epoch: 5,
        version: 7,
        tokenCount: 32,
        capacity: 100,
        queueDepth: 0,
        pushBackMs: 0,
      },
      body: { blockSize: BLOCK_SIZE, keys: Float64Array.of(1, 2) },
    };
    const good = encodeSnapshot(s);
    const code = (b: Uint8Array, limits?: object): string => {
      try {
        decodeSnapshot(b, limits);
        return "ok";
      } catch (e) {
        return (e as SnapshotDecodeError).code;
      }
    };
    expect(code(good)).toBe("ok");
    const badMagic = good.slice();
    badMagic[0] = 0;
    expect(code(badMagic)).toBe("bad-magic");
    const v2 = good.slice();
    v2[4] = 2;
    expect(code(withCrc(v2))).toBe("unsupported-version");
    const flipped = good.slice();
    flipped[12]! ^= 0x10;
    expect(code(flipped)).toBe("bad-checksum");
    expect(code(good.subarray(0, 10))).toBe("truncated");
    expect(code(withCrc(Uint8Array.from([...good.subarray(0, good.length - 4), 0, 0, 0, 0, 0])))).toBe(
      "trailing-bytes",
    );
    expect(code(good, { maxKeys: 1 })).toBe("too-large");
    expect(code(good, { maxBytes: 10 })).toBe("too-large");
    // a frame announcing 2^40 keys is refused from the count alone, before any allocation
    const huge = Uint8Array.from([
      ...good.subarray(0, good.length - 4 - 1 - 12),
      0x80,
      0x80,
      0x80,
      0x80,
      0x80,
      0x20,
      0,
      0,
      0,
      0,
    ]);
    expect(code(withCrc(huge), { maxKeys: 2 ** 45 })).toBe("truncated");
    expect(code(withCrc(huge))).toBe("too-large");
    // @ts-expect-error hostile callers may pass anything
    expect(code("not bytes")).toBe("bad-input");
  });

  it("encodes a real tree in well under 1 byte per cached token and decodes it into the same estimate", () => {
    const tree = new RadixTree({ capacity: 1e6 });
    for (let i = 0; i < 50; i++) {
      tree.insert(
        Uint32Array.from({ length: 540 }, (_, j) => (j < 450 ? (i % 5) * 1000 + j : 50_000 + i * 1000 + j)),
        i,
      );
    }
    const s: Snapshot = {
      kind: "full",
      header: {
        sender: "n",
        epoch: 1,
        version: tree.version,
        tokenCount: tree.size,
        capacity: 1e6,
        queueDepth: 0,
        pushBackMs: 0,
      },
      body: tree.snapshotBody(),
    };
    const bytes = encodeSnapshot(s);
    expect(bytes.length / tree.size).toBeLessThan(1);
    const decoded = decodeSnapshot(bytes);
    const index = new PeerIndex();
    if (decoded.kind !== "full") throw new Error("kind");
    index.replaceEstimate("n", decoded.body);
    for (const seq of tree.sequences()) {
      expect(index.match("n", seq)).toBe(Math.floor(seq.length / BLOCK_SIZE) * BLOCK_SIZE);
    }
  });

  it("refuses to encode out-of-range headers", () => {
    const h = { sender: "", epoch: 0, version: 0, tokenCount: 0, capacity: 0, queueDepth: 0, pushBackMs: 0 };
    expect(() => encodeSnapshot({ kind: "heartbeat", header: h })).toThrow(RangeError);
    expect(() => encodeSnapshot({ kind: "heartbeat", header: { ...h, sender: "x".repeat(65) } })).toThrow(
      RangeError,
    );
    expect(() => encodeSnapshot({ kind: "heartbeat", header: { ...h, sender: "x", epoch: -1 } })).toThrow(
      RangeError,
    );
  });
});

describe("isNewer", () => {
  it("orders (epoch, version) lexicographically", () => {
    expect(isNewer({ epoch: 2, version: 0 }, { epoch: 1, version: 99 })).toBe(true);
    expect(isNewer({ epoch: 1, version: 5 }, { epoch: 1, version: 4 })).toBe(true);
    expect(isNewer({ epoch: 1, version: 4 }, { epoch: 1, version: 4 })).toBe(false);
    expect(isNewer({ epoch: 1, version: 99 }, { epoch: 2, version: 0 })).toBe(false);
    fc.assert(
      fc.property(fc.nat(), fc.nat(), fc.nat(), fc.nat(), (e1, v1, e2, v2) => {
        const a = { epoch: e1, version: v1 };
        const b = { epoch: e2, version: v2 };
        // strict total order: exactly one of a>b, b>a, a=b
        const eq = e1 === e2 && v1 === v2;
        expect(Number(isNewer(a, b)) + Number(isNewer(b, a)) + Number(eq)).toBe(1);
      }),
      { numRuns: 1000 },
    );
  });
});
