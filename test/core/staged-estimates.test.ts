import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Tokens } from "../../src/core/engine.js";
import { Estimates } from "../../src/core/estimates.js";
import { PrefixNode } from "../../src/core/node/node.js";
import type { Effect } from "../../src/core/node/types.js";
import { PeerIndex } from "../../src/core/peer-index.js";
import { RadixTree } from "../../src/core/radix-tree.js";
import { isNewer, type Snapshot, type SnapshotHeader } from "../../src/core/snapshot.js";
import { arbSeq, sameSet } from "./ref-model.js";
import { arbSenderEvent, senderHistory } from "./sender-history.js";

const header = (sender: string, epoch: number, version: number): SnapshotHeader => ({
  sender,
  epoch,
  version,
  tokenCount: 0,
  capacity: 1000,
  queueDepth: 0,
  pushBackMs: 0,
});
const range = (from: number, n: number): Tokens => Uint32Array.from({ length: n }, (_, i) => from + i);

describe("PeerIndex: a replacement in steps", () => {
  it("ends equal to replaceEstimate, hides only its owner meanwhile, and leaves others intact", () => {
    fc.assert(
      fc.property(
        fc.array(arbSeq, { maxLength: 12 }),
        fc.array(arbSeq, { maxLength: 12 }),
        fc.array(arbSeq, { maxLength: 6 }),
        fc.integer({ min: 1, max: 7 }),
        (oldSeqs, newSeqs, otherSeqs, budget) => {
          const tree = (seqs: Tokens[]) => {
            const t = new RadixTree({ capacity: 10_000 });
            for (const [i, s] of seqs.entries()) t.insert(s, i);
            return t;
          };
          const [a0, a1, b] = [tree(oldSeqs), tree(newSeqs), tree(otherSeqs)];
          const stepped = new PeerIndex({ maxOwners: 4 });
          const direct = new PeerIndex({ maxOwners: 4 });
          for (const ix of [stepped, direct]) {
            ix.replaceEstimate("a", a0.snapshotBody());
            ix.replaceEstimate("b", b.snapshotBody());
          }
          direct.replaceEstimate("a", a1.snapshotBody());
          stepped.beginReplace("a", a1.snapshotBody());
          let steps = 0;
          for (;;) {
            expect(stepped.replacing).toBe("a");
            for (const s of [...oldSeqs, ...newSeqs]) {
              expect(stepped.match("a", s)).toBe(0);
              const all = stepped.matchAll(s);
              expect(all.lengths[all.owners.indexOf("a")]).toBe(0);
              expect(all.lengths[all.owners.indexOf("b")]).toBe(direct.match("b", s));
            }
            steps++;
            if (stepped.stepReplace(budget)) break;
          }
          expect(stepped.replacing).toBeUndefined();
          expect(steps).toBeGreaterThanOrEqual(1);
          expect(sameSet(new Set(stepped.estimateKeys("a")), new Set(direct.estimateKeys("a")))).toBe(true);
          expect(stepped.keyCount).toBe(direct.keyCount);
          for (const s of [...oldSeqs, ...newSeqs, ...otherSeqs]) {
            expect(stepped.matchAll(s).lengths).toEqual(direct.matchAll(s).lengths);
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it("staged replacements one after another (reusing the replaced key set) equal direct ones", () => {
    fc.assert(
      fc.property(
        fc.array(fc.array(fc.integer({ min: 0, max: 4000 }), { maxLength: 600 }), {
          minLength: 2,
          maxLength: 5,
        }),
        fc.integer({ min: 1, max: 5000 }),
        (bodies, budget) => {
          const stepped = new PeerIndex({ maxOwners: 4 });
          const direct = new PeerIndex({ maxOwners: 4 });
          const other = { blockSize: 16, keys: Float64Array.from([1, 2, 3, 5000]) };
          stepped.replaceEstimate("b", other);
          direct.replaceEstimate("b", other);
          for (const ks of bodies) {
            const body = { blockSize: 16, keys: Float64Array.from(new Set(ks.map((k) => k * 7919))) };
            direct.replaceEstimate("a", body);
            stepped.beginReplace("a", body);
            while (!stepped.stepReplace(budget));
            expect(sameSet(new Set(stepped.estimateKeys("a")), new Set(direct.estimateKeys("a")))).toBe(true);
            expect(stepped.keyCount).toBe(direct.keyCount);
            expect(stepped.estimateSize("b")).toBe(direct.estimateSize("b"));
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it("grows the merged table in steps while other owners change: every match stays exact", () => {
    const keysOf = (t: RadixTree) => new Set(t.snapshotBody().keys);
    fc.assert(
      fc.property(
        fc.array(arbSeq, { minLength: 1, maxLength: 10 }),
        fc.array(fc.tuple(fc.nat({ max: 2 }), arbSeq), { minLength: 10, maxLength: 40 }),
        // Steps of at least 4 keys: budget 1 made ~1,300 steps, each matching every query, and the
        // test ran past its timeout on a busy machine; a step's size changes no interleaving rule.
        fc.integer({ min: 4, max: 40 }),
        fc.integer({ min: 300, max: 700 }),
        (aSeqs, ops, budget, filler) => {
          const stepped = new PeerIndex({ maxOwners: 4 });
          const direct = new PeerIndex({ maxOwners: 4 });
          // b's made-up keys fill the merged table, so a's keys make it grow (past 1024 slots).
          const fill = {
            blockSize: 16,
            keys: Float64Array.from({ length: filler }, (_, i) => 2 ** 40 + i * 977),
          };
          const ta = new RadixTree({ capacity: 100_000 });
          for (const [i, q] of aSeqs.entries()) ta.insert(q, i);
          for (let i = 0; i < 600; i++) ta.insert(range(10_000 + i * 64, 32), 100 + i);
          // A dry run counts the steps, so c's changes below spread over every phase (the grow too).
          const dry = new PeerIndex({ maxOwners: 4 });
          dry.replaceEstimate("b", fill);
          dry.beginReplace("a", ta.snapshotBody());
          let steps = 1;
          while (!dry.stepReplace(budget)) steps++;
          for (const ix of [stepped, direct]) ix.replaceEstimate("b", fill);
          direct.replaceEstimate("a", ta.snapshotBody());
          stepped.beginReplace("a", ta.snapshotBody());
          const tc = new RadixTree({ capacity: 100_000 });
          const queries = [...aSeqs];
          let op = 0;
          let done = false;
          for (let step = 0; !done; step++) {
            done = stepped.stepReplace(budget);
            // Between steps, c's estimate moves: a delta adding a prompt, one removing some keys.
            const next = op < (step * ops.length) / steps ? ops[op++] : undefined;
            if (next !== undefined) {
              const [kind, q] = next;
              queries.push(q);
              const before = keysOf(tc);
              if (kind === 2) tc.evict(tc.size);
              else tc.insert(q, op);
              const after = keysOf(tc);
              const delta = {
                baseVersion: 0,
                version: 0,
                added: Float64Array.from([...after].filter((k) => !before.has(k))),
                removed: Float64Array.from([...before].filter((k) => !after.has(k))),
              };
              for (const ix of [stepped, direct]) ix.applyDelta("c", delta);
            }
            for (const q of queries) {
              const m = stepped.matchAll(q);
              const d = direct.matchAll(q);
              for (const who of ["b", "c"]) {
                const i = m.owners.indexOf(who);
                if (i >= 0) expect(m.lengths[i]).toBe(d.lengths[d.owners.indexOf(who)]);
              }
            }
          }
          expect(stepped.replacing).toBeUndefined();
          expect(stepped.keyCount).toBe(direct.keyCount);
          for (const q of queries) expect(stepped.matchAll(q).lengths).toEqual(direct.matchAll(q).lengths);
        },
      ),
      { numRuns: 25 },
    );
  });

  it("keeps the replaced key set of a large estimate and replaces into it, wiped", () => {
    const ix = new PeerIndex();
    const body = (from: number) => ({
      blockSize: 16,
      keys: Float64Array.from({ length: 40_000 }, (_, i) => (from + i) * 65_537),
    });
    for (const from of [0, 20_000, 100_000]) {
      ix.beginReplace("a", body(from));
      let steps = 0;
      while (!ix.stepReplace(4096)) steps++;
      // Bounded steps: wipe, build, clear, set, each a few thousand keys or slots at a time.
      expect(steps).toBeGreaterThan(10);
      const keys = new Set(ix.estimateKeys("a"));
      expect(keys.size).toBe(40_000);
      expect(keys.has(from * 65_537) && keys.has((from + 39_999) * 65_537)).toBe(true);
      expect(ix.keyCount).toBe(40_000);
    }
  });

  it("removing the owner mid-replacement clears both its old and its half-applied new keys", () => {
    const ix = new PeerIndex();
    const t = new RadixTree({ capacity: 10_000 });
    t.insert(range(0, 640), 1);
    ix.replaceEstimate("a", t.snapshotBody());
    t.insert(range(5000, 640), 2);
    ix.beginReplace("a", t.snapshotBody());
    while (!ix.stepReplace(3)) if (ix.keyCount > 40) break;
    ix.removePeer("a");
    expect(ix.keyCount).toBe(0);
    expect(ix.replacing).toBeUndefined();
  });

  it("an owner's estimate is capped at what it advertised", () => {
    const ix = new PeerIndex();
    ix.capOwner("a", 3);
    const t = new RadixTree({ capacity: 10_000 });
    t.insert(range(0, 160), 1);
    ix.replaceEstimate("a", t.snapshotBody());
    expect(ix.estimateSize("a")).toBe(3 * 16);
    ix.updateTrieEstimate("a", range(900, 160));
    expect(ix.estimateSize("a")).toBe(3 * 16);
    ix.beginReplace("a", t.snapshotBody());
    while (!ix.stepReplace(1));
    expect(ix.estimateSize("a")).toBe(3 * 16);
  });
});

describe("Estimates applied in steps (estimateStepKeys)", () => {
  it("any delivery order, steps interleaved: never regresses; the estimate is the sender's tree at the held version, or hidden while it is replaced", () => {
    fc.assert(
      fc.property(
        fc.array(arbSenderEvent, { minLength: 1, maxLength: 16 }),
        fc.array(fc.tuple(fc.nat(), fc.nat({ max: 3 })), { maxLength: 50 }),
        fc.integer({ min: 1, max: 4 }),
        (events, picks, stepKeys) => {
          const { sent, bodies, lastFull, tree, epoch } = senderHistory(events, {
            header: (e, t) => header("p", e, t.version),
            restartGap: () => 1,
            deltaBases: (v) => [0, v - 1],
          });
          const index = new PeerIndex();
          const est = new Estimates(index, stepKeys);
          let prev: { epoch: number; version: number } | undefined;
          const check = () => {
            const now = est.held("p");
            if (now === undefined) return;
            if (prev !== undefined) expect(isNewer(prev, now)).toBe(false);
            prev = now;
            if (index.replacing === "p") {
              for (const s of tree.sequences()) expect(index.match("p", s)).toBe(0);
            } else {
              const want = bodies.get(`${now.epoch}:${now.version}`)!;
              expect(sameSet(new Set(index.estimateKeys("p")), want)).toBe(true);
            }
          };
          for (const [p, steps] of picks) {
            est.apply(sent[p % sent.length]!);
            check();
            for (let i = 0; i < steps; i++) {
              est.step();
              check();
            }
          }
          est.apply(lastFull);
          for (let i = 0; est.busy && i < 100_000; i++) est.step();
          expect(est.busy).toBe(false);
          expect(est.held("p")).toEqual({ epoch, version: tree.version });
          check();
        },
      ),
      { numRuns: 500 },
    );
  });

  it("a second sender's large snapshot waits its turn, then applies", () => {
    const index = new PeerIndex();
    const est = new Estimates(index, 2);
    const t = new RadixTree({ capacity: 10_000 });
    t.insert(range(0, 160), 1);
    const full = (sender: string): Snapshot => ({
      kind: "full",
      header: header(sender, 1, 1),
      body: t.snapshotBody(),
    });
    expect(est.apply(full("p"))).toBe("deferred");
    expect(est.apply(full("q"))).toBe("deferred");
    expect(est.apply(full("q"))).toBe("duplicate");
    expect(index.replacing).toBe("p");
    expect(est.held("q")).toBeUndefined();
    let steps = 0;
    while (est.busy) {
      est.step();
      steps++;
    }
    expect(steps).toBeGreaterThan(4);
    expect(est.held("p")).toEqual({ epoch: 1, version: 1 });
    expect(est.held("q")).toEqual({ epoch: 1, version: 1 });
    expect(index.match("q", range(0, 160))).toBe(160);
  });
});

describe("PrefixNode: a large snapshot through the 'estimates' timer", () => {
  const full = (version: number, keys: number): Snapshot => {
    const t = new RadixTree({ capacity: 1_000_000 });
    t.insert(range(version * 100_000, keys * 16), 1);
    return { kind: "full", header: header("B", 1, version), body: t.snapshotBody() };
  };
  const make = () => {
    const node = new PrefixNode(
      { id: "A", peers: ["B"], capacityTokens: 10_000, estimateStepKeys: 8 },
      { now: () => 0, random: () => 0.5 },
      { checkInvariants: true },
    );
    node.start();
    return node;
  };
  const deliver = (node: PrefixNode, s: Snapshot) =>
    node.handle({ type: "peer-message", from: "B", msg: { type: "snapshot", snapshot: s } });
  const stepTimer = (effects: Effect[]) =>
    effects.some((e) => e.type === "set-timer" && e.timer.kind === "estimates");

  it("is applied a step per timer, routed on only once whole", () => {
    const node = make();
    let effects = deliver(node, full(1, 100));
    expect(node.heldOf("B")).toEqual({ epoch: 1, version: 0 }); // its epoch's empty version, until all is in
    expect(node.peerIndex().match("B", range(100_000, 1600))).toBe(0);
    let steps = 0;
    while (stepTimer(effects)) {
      effects = node.handle({ type: "timer", timer: { kind: "estimates" } });
      steps++;
    }
    expect(steps).toBeGreaterThan(10);
    expect(node.heldOf("B")).toEqual({ epoch: 1, version: 1 });
    expect(node.peerIndex().match("B", range(100_000, 1600))).toBe(1600);
    expect(node.stats().snapshotsReceived.deferred).toBe(1);
  });

  it("caps the estimate at the capacity the peer advertised", () => {
    const node = make();
    node.capPeerEstimate("B", 10 * 16);
    let effects = deliver(node, full(1, 100));
    while (stepTimer(effects)) effects = node.handle({ type: "timer", timer: { kind: "estimates" } });
    expect(node.peerIndex().estimateSize("B")).toBe(10 * 16);
  });
});
