/** Holder hints (gossip/hints.ts): the wire form and its bounds, what is news, what a round sends. */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { resolveNodeConfig } from "../../src/core/node/config.js";
import { decodeGossip, encodeGossip, GossipDecodeError } from "../../src/core/node/gossip/codec.js";
import {
  HINT_HOLDERS,
  HINT_KEYS,
  HINT_RELAYED,
  HINTS_MAX_KEYS,
  Hints,
  type HintsMessage,
} from "../../src/core/node/gossip/hints.js";
import { gossipSize } from "../../src/core/node/gossip/size.js";
import { GossipAntiEntropy } from "../../src/core/node/gossip-anti-entropy.js";
import type { Effect } from "../../src/core/node/types.js";
import { RadixTree } from "../../src/core/radix-tree.js";
import { varint } from "./gossip-pair.js";

const LIMITS = { maxEntries: 100, maxStates: 10, maxSnapshotBytes: 1 << 20 };
const key = fc.integer({ min: 0, max: 2 ** 48 - 1 });
const holder = fc.stringMatching(/^[A-Za-z0-9._-]{1,64}$/);

describe("hints wire form", () => {
  it("round-trips at exactly gossipSize bytes", () => {
    const groups = fc
      .array(fc.record({ holder, keys: fc.array(key, { minLength: 1, maxLength: 8 }) }), { maxLength: 4 })
      .filter((gs) => gs.reduce((n, g) => n + g.keys.length, 0) <= HINTS_MAX_KEYS);
    fc.assert(
      fc.property(groups, (gs) => {
        const msg: HintsMessage = { type: "hints", groups: gs };
        const bytes = encodeGossip(msg);
        expect(bytes.length).toBe(gossipSize(msg));
        expect(decodeGossip(bytes, LIMITS)).toEqual(msg);
      }),
    );
  });

  it("writes a key as 6 little-endian bytes (the snapshot codec's)", () => {
    const bytes = encodeGossip({ type: "hints", groups: [{ holder: "n1", keys: [0x010203040506] }] });
    expect([...bytes]).toEqual([7, 1, 2, 0x6e, 0x31, 1, 6, 5, 4, 3, 2, 1]);
  });

  it("refuses counts over the bound before reading keys, empty groups, bad holders, truncation", () => {
    const owner = [2, ..."n1"].map((c) => (typeof c === "number" ? c : c.charCodeAt(0)));
    // type 7, one group of one key over the bound, and no keys behind it.
    const tooMany = Uint8Array.from([7, 1, ...owner, ...varint(HINTS_MAX_KEYS + 1)]);
    expect(() => decodeGossip(tooMany, LIMITS)).toThrow(/at most/);
    // Two groups whose keys add up to one over the bound: the second count is refused.
    const half = HINTS_MAX_KEYS / 2;
    const keys = (n: number) => Array.from({ length: 6 * n }, () => 1);
    const split = [7, 2, ...owner, ...varint(half), ...keys(half), ...owner, ...varint(half + 1)];
    expect(() => decodeGossip(Uint8Array.from(split), LIMITS)).toThrow(/at most/);
    expect(() => decodeGossip(Uint8Array.from([7, ...varint(HINTS_MAX_KEYS + 1)]), LIMITS)).toThrow(/groups/);
    expect(() => decodeGossip(Uint8Array.from([7, 1, ...owner, 0]), LIMITS)).toThrow(/hint group/);
    expect(() => decodeGossip(Uint8Array.from([7, 1, 0]), LIMITS)).toThrow(/owner/);
    expect(() => decodeGossip(Uint8Array.from([7, 1, 1, 0x20, 1, ...keys(1)]), LIMITS)).toThrow(/owner/);
    const ok = encodeGossip({ type: "hints", groups: [{ holder: "n1", keys: [5, 6] }] });
    expect(() => decodeGossip(ok.subarray(0, ok.length - 1), LIMITS)).toThrow(GossipDecodeError);
    expect(() => decodeGossip(Uint8Array.from([...ok, 0]), LIMITS)).toThrow(/trailing/);
  });
});

describe("Hints", () => {
  it("passes on a pair new to it, a bounded number of times, and never itself as a relayed holder", () => {
    const h = new Hints("me");
    h.learn(1, "a");
    h.learn(1, "me");
    const sent: HintsMessage[] = [];
    for (let m = h.take(); m !== undefined; m = h.take()) sent.push(m);
    expect(sent.length).toBeGreaterThan(0);
    for (const m of sent) expect(m.groups).toEqual([{ holder: "a", keys: [1] }]);
    expect(h.holders(1)).toEqual(["a"]);
    // The same pair again is not news: nothing more is passed on.
    h.learn(1, "a");
    expect(h.take()).toBeUndefined();
    expect(h.holders(1)).toEqual(["a"]);
  });

  it("keeps HINT_HOLDERS holders a key, newest first; a holder beyond a full list is kept, not passed on", () => {
    const h = new Hints("me");
    const names = Array.from({ length: HINT_HOLDERS + 1 }, (_, i) => `m${i}`);
    for (const n of names) h.learn(7, n);
    expect(h.holders(7)).toEqual(names.slice(1).reverse());
    const passed = new Set<string>();
    for (let m = h.take(); m !== undefined; m = h.take()) for (const g of m.groups) passed.add(g.holder);
    expect(passed).toEqual(new Set(names.slice(0, HINT_HOLDERS)));
    h.remove(names[HINT_HOLDERS] as string);
    expect(h.holders(7)).not.toContain(names[HINT_HOLDERS]);
  });

  it("announces only its own summary's new keys, with itself as holder, at most HINTS_MAX_KEYS a message", () => {
    const h = new Hints("me");
    const keys = Array.from({ length: HINTS_MAX_KEYS + 5 }, (_, i) => 100 + i);
    h.announce(keys);
    const first = h.take() as HintsMessage;
    expect(first.groups).toEqual([{ holder: "me", keys: expect.any(Array) }]);
    expect(first.groups[0]?.keys.length).toBe(HINTS_MAX_KEYS);
    for (let m = h.take(); m !== undefined; m = h.take());
    h.announce([...keys, 999]);
    expect(h.take()).toEqual({ type: "hints", groups: [{ holder: "me", keys: [999] }] });
  });

  it("passes a pair on once even after its key left the index, again once its holder dropped it", () => {
    const h = new Hints("me");
    const drain = () => {
      let n = 0;
      for (let m = h.take(); m !== undefined; m = h.take())
        n += m.groups.reduce((s, g) => s + g.keys.length, 0);
      return n;
    };
    h.learn(1, "a");
    for (let k = 2; k <= HINT_KEYS + 1; k++) h.learn(k, "b");
    drain();
    expect(h.holders(1)).toEqual([]);
    h.learn(1, "a");
    expect(h.holders(1)).toEqual(["a"]);
    expect(drain()).toBe(0);
    h.remove("a");
    h.learn(1, "a");
    expect(drain()).toBe(1);
    expect(HINT_RELAYED).toBeGreaterThan(HINT_KEYS);
  });

  it("drops a holder's hints its summary no longer lists, and a removed member's queued rumors", () => {
    const h = new Hints("me");
    h.learn(1, "a");
    h.learn(2, "a");
    h.learn(3, "b");
    h.retain("a", [2, 9]);
    expect(h.holders(1)).toEqual([]);
    expect(h.holders(2)).toEqual(["a"]);
    expect(h.holders(3)).toEqual(["b"]);
    h.remove("b");
    expect(h.holders(3)).toEqual([]);
    const sent: HintsMessage["groups"] = [];
    for (let m = h.take(); m !== undefined; m = h.take()) sent.push(...m.groups);
    expect(sent).toEqual([{ holder: "a", keys: [2] }]);
  });

  it("holds at most HINT_KEYS keys, forgetting the least recently learnt, and sends at most HINTS_MAX_KEYS", () => {
    const h = new Hints("me");
    for (let k = 0; k < HINT_KEYS + 10; k++) h.learn(k, `m${k % 7}`);
    expect(h.keys).toBe(HINT_KEYS);
    expect(h.holders(0)).toEqual([]);
    expect(h.holders(HINT_KEYS + 9)).toEqual([`m${(HINT_KEYS + 9) % 7}`]);
    for (let m = h.take(); m !== undefined; m = h.take())
      expect(m.groups.reduce((n, g) => n + g.keys.length, 0)).toBeLessThanOrEqual(HINTS_MAX_KEYS);
  });
});

describe("hints from a member", () => {
  const peers = Array.from({ length: 12 }, (_, i) => `p${i}`);
  function node(): { g: GossipAntiEntropy; pollMs: number; rounds: number } {
    const config = resolveNodeConfig({
      id: "me",
      peers,
      capacityTokens: 4096,
      gossip: "scuttlebutt",
      maxEstimates: 2,
    });
    const g = new GossipAntiEntropy(config, "me", { now: () => 0, random: () => 0.5 });
    g.reset(1, peers, peers.length + 1);
    return { g, pollMs: config.pollMs, rounds: config.gossipRoundsPerPoll };
  }
  function node2(id: string): { g: GossipAntiEntropy } {
    const others = ["me", ...peers.filter((p) => p !== id)];
    const config = resolveNodeConfig({
      id,
      peers: others,
      capacityTokens: 4096,
      gossip: "scuttlebutt",
      maxEstimates: 2,
    });
    const g = new GossipAntiEntropy(config, id, { now: () => 0, random: () => 0 });
    g.reset(1, others, peers.length + 1);
    return { g };
  }
  /** `a` (id p2) and `b` (id me) push-pull until quiet. */
  function exchange(a: GossipAntiEntropy, b: GossipAntiEntropy, treeA: RadixTree, now: number): void {
    let toB: Effect[] = [];
    a.round(now, treeA, 0, 0, [{ id: "me", live: true, rttMs: 1 }], toB);
    for (let i = 0; i < 6 && toB.length > 0; i++) {
      const toA: Effect[] = [];
      for (const e of toB)
        if (e.type === "mesh-send" && e.msg.channel === "gossip" && e.to === "me")
          b.onGossip("p2", e.msg.msg, now, tree, 0, 0, toA);
      toB = [];
      for (const e of toA)
        if (e.type === "mesh-send" && e.msg.channel === "gossip" && e.to === "p2")
          a.onGossip("me", e.msg.msg, now, treeA, 0, 0, toB);
    }
  }
  const tree = new RadixTree({ capacity: 100_000 });
  const msg = (base: number): HintsMessage => ({
    type: "hints",
    groups: [{ holder: "p2", keys: Array.from({ length: HINTS_MAX_KEYS }, (_, i) => base + i) }],
  });

  it("are bounded per sender: a flood cannot flush the index, and other senders still get through", () => {
    const { g } = node();
    for (let m = 0; m < 1_000; m++) g.onGossip("p1", msg(m * HINTS_MAX_KEYS), 0, tree, 0, 0, []);
    expect(g.hintStats.dropped).toBeGreaterThan(900);
    expect(g.hintStats.keys).toBeLessThan(HINT_KEYS / 2);
    const before = g.hintStats.keys;
    g.onGossip("p3", msg(10_000_000), 0, tree, 0, 0, []);
    expect(g.hintStats.keys).toBe(before + HINTS_MAX_KEYS);
  });

  it("naming a member that restarted (a new epoch) are dropped", () => {
    const { g } = node();
    const { g: p2 } = node2("p2");
    const t2 = new RadixTree({ capacity: 100_000 });
    t2.insert(
      Uint32Array.from({ length: 64 }, (_, i) => i + 1),
      0,
    );
    exchange(p2, g, t2, 1);
    const own = g.hintStats.keys;
    g.onGossip("p1", msg(0), 1, tree, 0, 0, []);
    expect(g.hintStats.keys).toBe(own + HINTS_MAX_KEYS);
    p2.reset(2, ["me", ...peers.filter((p) => p !== "p2")], peers.length + 1);
    exchange(p2, g, t2, 2);
    expect(g.hintStats.keys).toBeLessThanOrEqual(own);
  });

  it("never drop an honest pace: one relay per Δpoll / 16 and one with each round", () => {
    const { g, pollMs, rounds } = node();
    let sent = 0;
    const send = (t: number) => g.onGossip("p1", msg(HINTS_MAX_KEYS * sent++), t, tree, 0, 0, []);
    for (let t = 0; t < 50 * pollMs; t += pollMs / 16) {
      send(t);
      if (Math.floor((t * rounds) / pollMs) !== Math.floor(((t + pollMs / 16) * rounds) / pollMs)) send(t);
    }
    expect(g.hintStats.dropped).toBe(0);
  });
});
