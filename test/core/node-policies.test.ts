/** Routing policies on hand-made candidate lists. */
import { describe, expect, it } from "vitest";
import { type Candidate, createPolicy, POLICY_NAMES } from "../../src/core/node/policies/index.js";
import { Prng } from "../../src/core/prng.js";

function cands(spec: [string, number, number][]): Candidate[] {
  return spec.map(([id, match, queue], i) => ({
    id,
    self: i === 0,
    estimatedMatch: match,
    estimateAgeMs: 0,
    queueDepth: queue,
    rttMs: 1,
    capacityTokens: 1000,
  }));
}

const ctx = (seed = 1) => {
  const r = new Prng(seed);
  return { promptTokens: 100, now: 0, random: () => r.next() };
};

describe("routing policies", () => {
  it("every policy returns a permutation containing self", () => {
    const c = cands([
      ["A", 10, 3],
      ["B", 40, 0],
      ["C", 40, 1],
      ["D", 0, 0],
    ]);
    for (const name of POLICY_NAMES) {
      const order = createPolicy(name).rank(c, ctx());
      expect(order, name).toContain(0);
      expect(new Set(order).size, name).toBe(order.length);
      for (const i of order) expect(i).toBeLessThan(c.length);
    }
  });

  it("local always picks self", () => {
    expect(
      createPolicy("local").rank(
        cands([
          ["A", 0, 9],
          ["B", 99, 0],
        ]),
        ctx(),
      )[0],
    ).toBe(0);
  });

  it("affinity: longest match first, ties to self, random among tied peers", () => {
    const p = createPolicy("affinity");
    expect(
      p.rank(
        cands([
          ["A", 10, 0],
          ["B", 40, 0],
          ["C", 20, 0],
        ]),
        ctx(),
      ),
    ).toEqual([1, 2, 0]);
    expect(
      p.rank(
        cands([
          ["A", 40, 0],
          ["B", 40, 0],
        ]),
        ctx(),
      )[0],
    ).toBe(0);
    const firsts = new Set<number>();
    for (let s = 1; s <= 50; s++)
      firsts.add(
        p.rank(
          cands([
            ["A", 0, 0],
            ["B", 40, 0],
            ["C", 40, 0],
          ]),
          ctx(s),
        )[0]!,
      );
    expect(firsts).toEqual(new Set([1, 2]));
  });

  it("affinity-argmax: first maximum in id order wins, self included at its position", () => {
    const p = createPolicy("affinity-argmax");
    // Nobody holds anything: the lowest id wins, even over self.
    expect(
      p.rank(
        cands([
          ["C", 0, 0],
          ["A", 0, 0],
          ["B", 0, 0],
        ]),
        ctx(),
      )[0],
    ).toBe(1);
    expect(
      p.rank(
        cands([
          ["C", 10, 0],
          ["A", 40, 0],
          ["B", 40, 0],
        ]),
        ctx(),
      )[0],
    ).toBe(1);
    expect(
      p.rank(
        cands([
          ["A", 40, 0],
          ["B", 40, 0],
        ]),
        ctx(),
      )[0],
    ).toBe(0);
  });

  it("round-robin cycles over all eligible nodes", () => {
    const p = createPolicy("round-robin");
    const c = cands([
      ["A", 0, 0],
      ["B", 0, 0],
      ["C", 0, 0],
    ]);
    const firsts = [0, 1, 2, 3, 4, 5].map(() => c[p.rank(c, ctx())[0]!]!.id);
    expect(firsts).toEqual(["A", "B", "C", "A", "B", "C"]);
  });

  it("random spreads over nodes; least-loaded picks the shortest queue, ties to self", () => {
    const c = cands([
      ["A", 0, 2],
      ["B", 0, 0],
      ["C", 50, 0],
    ]);
    const seen = new Set<number>();
    const p = createPolicy("random");
    for (let s = 1; s <= 60; s++) seen.add(p.rank(c, ctx(s))[0]!);
    expect(seen).toEqual(new Set([0, 1, 2]));
    const ll = createPolicy("least-loaded");
    expect(ll.rank(c, ctx())[0]).toBe(2); // B and C idle; C has the longer match
    expect(
      ll.rank(
        cands([
          ["A", 0, 0],
          ["B", 90, 0],
        ]),
        ctx(),
      )[0],
    ).toBe(0);
  });
});
