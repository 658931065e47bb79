/**
 * Scuttlebutt's digest merge against a naive model: every owner's true key set at every version it
 * ever had. Whatever the interleaving of changes, exchanges and lost legs, an estimate never moves
 * back and always equals its owner's tree at the version held; once exchanges run loss-free, every
 * node holds every owner's latest.
 */
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { type GossipMessage, netDeltas } from "../../src/core/node/gossip/scuttlebutt.js";
import { gossipSize } from "../../src/core/node/gossip/size.js";
import type { SnapshotDelta } from "../../src/core/snapshot.js";
import { GossipRounds } from "../../src/sim/gossip-rounds.js";

type Op =
  | { kind: "change"; i: number; evict: boolean }
  | { kind: "exchange"; from: number; to: number; lost: [boolean, boolean, boolean] };

const N = 5;
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant("change" as const), i: fc.nat({ max: N - 1 }), evict: fc.boolean() }),
  fc.record({
    kind: fc.constant("exchange" as const),
    from: fc.nat({ max: N - 1 }),
    to: fc.nat({ max: N - 1 }),
    lost: fc.tuple(fc.boolean(), fc.boolean(), fc.boolean()),
  }),
);

const sorted = (keys: Float64Array): number[] => [...keys].sort((a, b) => a - b);

function check(
  sim: GossipRounds,
  model: Map<string, number[]>[],
  last: Map<string, number>,
  maxEstimates: number,
) {
  for (const n of sim.nodes) {
    let held = 0;
    for (const o of sim.nodes) {
      if (o === n) continue;
      const h = n.gossip.estimates.held(o.id);
      if (h === undefined) continue;
      held++;
      const key = `${n.id}/${o.id}`;
      expect(h.version).toBeGreaterThanOrEqual(last.get(key) ?? 0);
      last.set(key, h.version);
      const truth = model[Number(o.id.slice(1))]?.get(String(h.version)) ?? [];
      expect(sorted(n.gossip.index.estimateKeys(o.id))).toEqual(truth);
    }
    expect(held).toBeLessThanOrEqual(maxEstimates);
  }
}

/**
 * "Never regress" holds while an estimate is held: one dropped under --max-estimates is forgotten, and
 * when taken up again it starts from whatever state arrives (its owner's empty version 0 until the
 * full key set comes, or an older relayed state). A spy on each node's drops resets that pair's floor.
 */
function forgetOnDrop(sim: GossipRounds, last: Map<string, number>): void {
  for (const n of sim.nodes) {
    const remove = n.gossip.remove.bind(n.gossip);
    n.gossip.remove = (owner) => {
      last.delete(`${n.id}/${owner}`);
      remove(owner);
    };
  }
}

type Step = { kind: "change"; i: number; evict: boolean } | { kind: "round" };
const change = (i: number): Step => ({ kind: "change", i, evict: false });
const ROUND: Step = { kind: "round" };
const REDROP: Step[] = [ROUND, change(4), change(0), ROUND, ROUND, change(4), ROUND];

function exchange(sim: GossipRounds, from: number, to: number, lost: boolean[]): void {
  const a = sim.nodes[from];
  const b = sim.nodes[to];
  if (a === undefined || b === undefined || a === b) return;
  const digest: GossipMessage = { type: "digest", entries: a.gossip.digest(a.own), room: 8 };
  if (lost[0]) return;
  const answer = b.gossip.onMessage(a.id, digest, b.own);
  if (answer === undefined || lost[1]) return;
  const back = a.gossip.onMessage(b.id, answer, a.own);
  if (back === undefined || lost[2]) return;
  expect(b.gossip.onMessage(a.id, back, b.own)).toBeUndefined();
}

function play(ops: Op[], maxEstimates: number) {
  const sim = new GossipRounds({ nodes: N, seed: 7, maxEstimates });
  const model = sim.nodes.map(() => new Map<string, number[]>([["0", []]]));
  const last = new Map<string, number>();
  forgetOnDrop(sim, last);
  for (const o of ops) {
    if (o.kind === "change") {
      const n = sim.nodes[o.i];
      if (n === undefined) continue;
      if (o.evict && n.tree.size > 0) n.tree.evict(32);
      else sim.change(o.i, 2);
      model[o.i]?.set(String(n.tree.version), sorted(n.tree.snapshotBody().keys));
    } else exchange(sim, o.from, o.to, o.lost);
    check(sim, model, last, maxEstimates);
  }
  return sim;
}

describe("scuttlebutt digest merge", () => {
  test("estimates never regress and always equal the owner's tree at the version held", () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), (ops) => {
        const sim = play(ops, Number.POSITIVE_INFINITY);
        // Loss-free exchanges between every ordered pair, twice: everyone holds every latest.
        for (let r = 0; r < 2; r++)
          for (let i = 0; i < N; i++) for (let j = 0; j < N; j++) exchange(sim, i, j, [false, false, false]);
        for (let i = 0; i < N; i++) expect(sim.holders(i)).toBe(N);
      }),
      { numRuns: 150 },
    );
  });

  test("with --max-estimates, at most M owners are held, each still exact", () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), (ops) => {
        play(ops, 2);
      }),
      { numRuns: 100 },
    );
  });

  test("with push to holders and lost messages, estimates stay exact and never regress", () => {
    const step: fc.Arbitrary<Step> = fc.oneof(
      fc.record({ kind: fc.constant("change" as const), i: fc.nat({ max: N - 1 }), evict: fc.boolean() }),
      fc.record({ kind: fc.constant("round" as const) }),
    );
    fc.assert(
      fc.property(fc.array(step, { maxLength: 40 }), fc.nat(), (ops, seed) => {
        const sim = new GossipRounds({ nodes: N, seed, maxEstimates: 2, lossProb: 0.2 });
        const model = sim.nodes.map(() => new Map<string, number[]>([["0", []]]));
        const last = new Map<string, number>();
        forgetOnDrop(sim, last);
        for (const o of ops) {
          if (o.kind === "round") sim.round();
          else {
            const n = sim.nodes[o.i] as (typeof sim.nodes)[number];
            if (o.evict && n.tree.size > 0) n.tree.evict(32);
            else sim.change(o.i, 2);
            model[o.i]?.set(String(n.tree.version), sorted(n.tree.snapshotBody().keys));
          }
          check(sim, model, last, 2);
        }
      }),
      // Always replayed: n3 drops n4 under the bound, then takes it up again from a delta (empty, version 0).
      { numRuns: 100, examples: [[REDROP, 19]] },
    );
  });

  test("a relay never passes on a key set it guessed at (an optimistic insert)", () => {
    const sim = new GossipRounds({ nodes: 3, seed: 1 });
    sim.change(0);
    const [a, b, c] = sim.nodes;
    if (!a || !b || !c) throw new Error("three nodes");
    exchange(sim, 1, 0, [false, false, false]);
    expect(b.gossip.estimates.held("n0")?.version).toBe(1);
    // b guesses n0 now caches another prompt (what a forward's result tells an origin).
    b.gossip.index.updateTrieEstimate("n0", new Uint32Array(64).fill(7));
    b.gossip.polluted("n0");
    exchange(sim, 2, 1, [false, false, false]);
    expect(c.gossip.estimates.held("n0")).toBeUndefined();
    // From the owner itself, c gets the truth.
    exchange(sim, 2, 0, [false, false, false]);
    expect(sorted(c.gossip.index.estimateKeys("n0"))).toEqual(sorted(a.tree.snapshotBody().keys));
  });

  test("a relayed chain netted into one delta lands on the same key set as the chain step by step", () => {
    // Each step: a set of keys toggled (present → removed, absent → added): exact deltas.
    const steps = fc.array(fc.uniqueArray(fc.integer({ min: 0, max: 40 }), { maxLength: 12 }), {
      minLength: 1,
      maxLength: 8,
    });
    fc.assert(
      fc.property(fc.uniqueArray(fc.integer({ min: 0, max: 40 })), steps, (base, toggles) => {
        const set = new Set(base);
        const chain: SnapshotDelta[] = toggles.map((t, i) => {
          const added = t.filter((k) => !set.has(k));
          const removed = t.filter((k) => set.has(k));
          for (const k of removed) set.delete(k);
          for (const k of added) set.add(k);
          return {
            baseVersion: i,
            version: i + 1,
            added: Float64Array.from(added),
            removed: Float64Array.from(removed),
          };
        });
        const net = netDeltas(chain);
        expect([net.baseVersion, net.version]).toEqual([0, toggles.length]);
        const after = new Set(base);
        for (const k of net.removed) expect(after.delete(k)).toBe(true);
        for (const k of net.added) {
          expect(after.has(k)).toBe(false);
          after.add(k);
        }
        expect([...after].sort((a, b) => a - b)).toEqual([...set].sort((a, b) => a - b));
      }),
    );
  });

  test("a round's digests go to one partner after another, each up to date with the last answer", () => {
    const sim = new GossipRounds({ nodes: 4, seed: 3 });
    sim.change(1);
    const a = sim.nodes[0];
    if (!a) throw new Error("node");
    const first = a.gossip.round(["n1", "n2", "n3"], a.own);
    expect(first.length).toBe(1);
    const p = first[0];
    if (!p) throw new Error("one digest");
    // No answer yet: nothing more goes out; an answer from another member does not advance it either.
    const other = ["n1", "n2", "n3"].find((x) => x !== p.to) as string;
    expect(a.gossip.continueRound(other, a.own)).toBeUndefined();
    const next = a.gossip.continueRound(p.to, a.own);
    expect(next?.msg.type).toBe("digest");
    expect(next?.to).not.toBe(p.to);
    expect(a.gossip.continueRound(next?.to as string, a.own)?.to).not.toBe(next?.to);
  });

  test("a member greeted on admission and its greeter hold each other after one exchange, empty or not", () => {
    for (const changed of [false, true]) {
      const sim = new GossipRounds({ nodes: 3, seed: 3 });
      const [a, b] = sim.nodes as [(typeof sim.nodes)[number], (typeof sim.nodes)[number]];
      if (changed) sim.change(1, 2);
      const hello = a.gossip.greet(b.id, a.own, 2);
      expect(hello).toMatchObject({ type: "digest", room: 1 });
      const answer = b.gossip.onMessage(a.id, hello as GossipMessage, b.own);
      const back = a.gossip.onMessage(b.id, answer as GossipMessage, a.own);
      expect(b.gossip.onMessage(a.id, back as GossipMessage, b.own)).toBeUndefined();
      // Each holds the other at its version (version 0 of an empty cache is held too), nothing more.
      const epoch = a.own.header().epoch;
      expect(b.tree.version > 0).toBe(changed);
      expect(a.gossip.estimates.held(b.id)).toEqual({ epoch, version: b.tree.version });
      expect(b.gossip.estimates.held(a.id)).toEqual({ epoch, version: 0 });
      expect([...a.gossip.owners()]).toEqual([b.id]);
      expect(a.gossip.greet(b.id, a.own, 1)).toBeUndefined();
    }
  });

  test("below --max-estimates, a random share of the members admitted is greeted, never past M", () => {
    const sim = new GossipRounds({ nodes: 2, seed: 5, maxEstimates: 4 });
    const a = sim.nodes[0] as (typeof sim.nodes)[number];
    let greeted = 0;
    for (let i = 0; i < 400; i++) if (a.gossip.greet(`m${i}`, a.own, 400) !== undefined) greeted++;
    // Room 4 of 400 unheld: about 1 in 100.
    expect(greeted).toBeGreaterThan(0);
    expect(greeted).toBeLessThan(20);
  });

  test("a digest's room bounds the new owners sent to its sender, picked at random", () => {
    const sim = new GossipRounds({ nodes: 6, seed: 5 });
    for (let i = 0; i < 6; i++) sim.change(i);
    for (let r = 0; r < 4; r++) sim.round();
    const n5 = sim.nodes[5];
    if (!n5) throw new Error("node");
    const sent = (room: number) => {
      const answer = n5.gossip.onMessage("n0", { type: "digest", entries: [], room }, n5.own);
      return answer?.type === "states" ? answer.states.map((s) => s.snapshot.header.sender) : [];
    };
    expect(sent(0)).toEqual([]);
    expect(sent(1).length).toBe(1);
    expect(new Set(sent(3)).size).toBe(3);
    // Random picks: over a few digests, more than the same first three owners.
    const seen = new Set<string>();
    for (let i = 0; i < 12; i++) for (const o of sent(2)) seen.add(o);
    expect(seen.size).toBeGreaterThan(3);
  });

  test("malformed or oversized messages are refused and counted", () => {
    const sim = new GossipRounds({ nodes: 2, seed: 1 });
    const n = sim.nodes[0];
    if (!n) throw new Error("node");
    const entries = Array.from({ length: 9000 }, (_, i) => ({ owner: `x${i}`, epoch: 1, version: 1 }));
    expect(n.gossip.onMessage("n1", { type: "digest", entries, room: 8 }, n.own)).toBeUndefined();
    expect(n.gossip.counters.invalid).toBe(1);
    expect(gossipSize({ type: "digest", entries: [{ owner: "n1", epoch: 1, version: 300 }], room: 8 })).toBe(
      2 + 1 + 3 + 1 + 2,
    );
  });
});
