/** The Scuttlebutt wire codec: exact round trips, sizes equal to what the simulator counts, bounds. */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { decodeGossip, encodeGossip, GossipDecodeError } from "../../src/core/node/gossip/codec.js";
import type { GossipMessage } from "../../src/core/node/gossip/scuttlebutt.js";
import { gossipSize } from "../../src/core/node/gossip/size.js";
import { RadixTree } from "../../src/core/radix-tree.js";
import type { SnapshotHeader } from "../../src/core/snapshot.js";

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
    expect(() => decodeGossip(Uint8Array.of(7), LIMITS)).toThrow(/unknown type/);
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
});
