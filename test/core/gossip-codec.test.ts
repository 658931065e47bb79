/** The Scuttlebutt wire codec: exact round trips, sizes equal to what the simulator counts, bounds. */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { decodeGossip, encodeGossip, GossipDecodeError } from "../../src/core/node/gossip/codec.js";
import type { GossipMessage } from "../../src/core/node/gossip/scuttlebutt.js";
import { gossipSize } from "../../src/core/node/gossip/size.js";
import { RadixTree } from "../../src/core/radix-tree.js";
import type { SnapshotHeader } from "../../src/core/snapshot.js";
import { encodeSnapshot } from "../../src/core/snapshot-codec.js";

const LIMITS = { maxEntries: 100, maxStates: 10, maxSnapshotBytes: 1 << 20 };
const header = (sender: string, version: number): SnapshotHeader => ({
  sender,
  epoch: 1_700_000_000_000,
  version,
  tokenCount: 64,
  capacity: 1024,
  queueDepth: 2,
  pushBackMs: 0,
});
const owner = fc.stringMatching(/^[A-Za-z0-9._-]{1,64}$/);
const entry = fc.record({ owner, epoch: fc.nat(), version: fc.nat() });

function fullState(sender: string, tokens: number[]) {
  const tree = new RadixTree({ capacity: 4096 });
  tree.insert(Uint32Array.from(tokens), 0);
  return {
    snapshot: { kind: "full" as const, header: header(sender, tree.version), body: tree.snapshotBody() },
    blocks: tree.snapshotBody().keys.length,
  };
}

describe("gossip codec", () => {
  it("round-trips digests at exactly gossipSize bytes", () => {
    fc.assert(
      fc.property(fc.array(entry, { maxLength: 20 }), fc.nat({ max: 64 }), (entries, room) => {
        const msg: GossipMessage = { type: "digest", entries, room };
        const bytes = encodeGossip(msg);
        expect(bytes.length).toBe(gossipSize(msg));
        expect(decodeGossip(bytes, LIMITS)).toEqual(msg);
      }),
    );
  });

  it("round-trips digests that carry their sender's load, and refuses an absurd queue depth", () => {
    fc.assert(
      fc.property(
        fc.array(entry, { maxLength: 20 }),
        fc.nat({ max: 64 }),
        fc.nat({ max: 1_000_000 }),
        fc.nat({ max: 600_000 }),
        (entries, room, queueDepth, pushBackMs) => {
          const msg: GossipMessage = { type: "digest", entries, room, load: { queueDepth, pushBackMs } };
          const bytes = encodeGossip(msg);
          expect(bytes[0]).toBe(2);
          expect(bytes.length).toBe(gossipSize(msg));
          expect(decodeGossip(bytes, LIMITS)).toEqual(msg);
        },
      ),
    );
    const bad = encodeGossip({
      type: "digest",
      entries: [],
      room: 0,
      load: { queueDepth: 2_000_000, pushBackMs: 0 },
    });
    expect(() => decodeGossip(bad, LIMITS)).toThrow(GossipDecodeError);
  });

  it("round-trips states (full snapshots, unknown block counts) and wants at exactly gossipSize bytes", () => {
    const s = fullState(
      "n1",
      Array.from({ length: 64 }, (_, i) => i),
    );
    const msg: GossipMessage = {
      type: "states",
      states: [s, { ...s, blocks: -1 }],
      wants: [{ owner: "n2", epoch: 3, version: 9 }],
    };
    const bytes = encodeGossip(msg);
    expect(bytes.length).toBe(gossipSize(msg));
    const back = decodeGossip(bytes, LIMITS);
    expect(back.type).toBe("states");
    if (back.type !== "states") return;
    expect(back.wants).toEqual(msg.wants);
    expect(back.states.map((x) => x.blocks)).toEqual([s.blocks, -1]);
    expect(back.states[0]?.snapshot.header).toEqual(s.snapshot.header);
  });

  it("refuses truncated, oversized and trailing input", () => {
    const bytes = encodeGossip({
      type: "digest",
      entries: [{ owner: "a", epoch: 1, version: 2 }],
      room: 3,
    });
    expect(() => decodeGossip(bytes.subarray(0, bytes.length - 1), LIMITS)).toThrow(GossipDecodeError);
    expect(() => decodeGossip(Uint8Array.from([...bytes, 0]), LIMITS)).toThrow(GossipDecodeError);
    expect(() => decodeGossip(bytes, { ...LIMITS, maxEntries: 0 })).toThrow(/at most 0/);
    expect(() => decodeGossip(bytes, { ...LIMITS, maxEntries: 2 })).toThrow(/room for 3 owners/);
    expect(() => decodeGossip(Uint8Array.of(8), LIMITS)).toThrow(/unknown type/);
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (junk) => {
        try {
          decodeGossip(junk, LIMITS);
        } catch (err) {
          expect(err).toBeInstanceOf(GossipDecodeError);
        }
      }),
    );
  });

  it("round-trips delta states with every header field as compact frames, 10 bytes under whole frames or 11", () => {
    const key = fc.integer({ min: 0, max: 2 ** 48 - 1 });
    fc.assert(
      fc.property(
        owner,
        fc.nat({ max: 2 ** 40 }),
        fc.integer({ min: 1, max: 1_000_000 }),
        fc.array(key, { maxLength: 12 }),
        fc.array(key, { maxLength: 12 }),
        fc.boolean(),
        fc.option(fc.nat({ max: 1_000_000 }), { nil: undefined }),
        (sender, epoch, version, added, removed, withCosts, served) => {
          const h: SnapshotHeader = {
            ...header(sender, version),
            epoch,
            ...(withCosts
              ? { costs: { fixedMs: 12, msPerUncached: 0.25, msPerCached: 0.001, msPerOutput: 20 } }
              : {}),
            ...(served === undefined ? {} : { served }),
          };
          const delta = {
            baseVersion: version - 1,
            version,
            added: Float64Array.from(added),
            removed: Float64Array.from(removed),
          };
          const snapshot = { kind: "delta" as const, header: h, delta };
          const msg: GossipMessage = {
            type: "states",
            states: [{ snapshot, blocks: added.length }],
            wants: [],
          };
          const bytes = encodeGossip(msg);
          expect(bytes.length).toBe(gossipSize(msg));
          // 10 bytes of frame, and one of its length's varint when that crosses a 7-bit boundary.
          expect([10, 11]).toContain(legacyStates(msg).length - bytes.length);
          const back = decodeGossip(bytes, LIMITS);
          expect(back).toEqual(msg);
        },
      ),
    );
  });

  it("still decodes states with whole snapshot frames (type 1)", () => {
    const s = fullState(
      "n1",
      Array.from({ length: 48 }, (_, i) => 3 * i),
    );
    const msg: GossipMessage = {
      type: "states",
      states: [s],
      wants: [{ owner: "n2", epoch: 3, version: 9 }],
    };
    expect(decodeGossip(legacyStates(msg), LIMITS)).toEqual(decodeGossip(encodeGossip(msg), LIMITS));
  });

  it("bounds compact frames: length, kind, flags, and any corruption is a GossipDecodeError", () => {
    const s = fullState(
      "n1",
      Array.from({ length: 32 }, (_, i) => i),
    );
    const msg: GossipMessage = { type: "states", states: [s], wants: [] };
    const bytes = encodeGossip(msg);
    expect(bytes[0]).toBe(3);
    const frameLen = bytes[2] as number;
    // A compact frame whose whole frame would exceed the limit is refused before anything is built.
    expect(() => decodeGossip(bytes, { ...LIMITS, maxSnapshotBytes: frameLen + 9 })).toThrow(
      /bad snapshot length/,
    );
    expect(decodeGossip(bytes, { ...LIMITS, maxSnapshotBytes: frameLen + 10 }).type).toBe("states");
    // Shorter than its kind and flags.
    expect(() => decodeGossip(Uint8Array.of(3, 1, 1, 1, 1, 0), LIMITS)).toThrow(GossipDecodeError);
    expect(() => decodeGossip(Uint8Array.of(3, 1, 0, 1, 0), LIMITS)).toThrow(GossipDecodeError);
    // An unknown kind, unknown flags.
    for (const [at, v] of [
      [3, 9],
      [4, 0x80],
    ] as const) {
      const bad = Uint8Array.from(bytes);
      bad[at] = v;
      expect(() => decodeGossip(bad, LIMITS)).toThrow(GossipDecodeError);
    }
    fc.assert(
      fc.property(fc.nat({ max: bytes.length - 1 }), fc.integer({ min: 1, max: 255 }), (at, x) => {
        const bad = Uint8Array.from(bytes);
        bad[at] = (bad[at] as number) ^ x;
        try {
          const back = decodeGossip(bad, LIMITS);
          // What decodes is a well-formed message within the limits.
          expect(back.type === "states" ? back.states.length : 0).toBeLessThanOrEqual(LIMITS.maxStates);
        } catch (err) {
          expect(err).toBeInstanceOf(GossipDecodeError);
        }
      }),
    );
  });
});

/** A states message in the earlier form (type 1: whole snapshot frames), built here by hand. */
function legacyStates(msg: GossipMessage): Uint8Array {
  if (msg.type !== "states") throw new Error("states only");
  const out: number[] = [1];
  const varint = (v: number) => {
    while (v >= 0x80) {
      out.push((v % 0x80) | 0x80);
      v = Math.floor(v / 0x80);
    }
    out.push(v);
  };
  varint(msg.states.length);
  for (const s of msg.states) {
    const frame = encodeSnapshot(s.snapshot);
    varint(frame.length);
    out.push(...frame);
    varint(s.blocks < 0 ? 1 : 2 * s.blocks);
  }
  varint(msg.wants.length);
  for (const w of msg.wants) {
    out.push(w.owner.length, ...Array.from(w.owner, (c) => c.charCodeAt(0)));
    varint(w.epoch);
    varint(w.version);
  }
  return Uint8Array.from(out);
}
