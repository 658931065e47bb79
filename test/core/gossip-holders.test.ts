import { describe, expect, test } from "vitest";
import { Holders, Renewals } from "../../src/core/node/gossip/holders.js";

const all = () => true;

describe("push to holders: the owner's side", () => {
  test("a holder behind our version is pushed to from its cursor, which then moves to ours", () => {
    const h = new Holders(8, 10);
    h.note("a", { epoch: 1, version: 3 }, 0);
    h.note("b", { epoch: 1, version: 5 }, 0);
    expect(h.due({ epoch: 1, version: 5 }, 1, all)).toEqual([{ to: "a", from: { epoch: 1, version: 3 } }]);
    // Assumed delivered: nothing due until we change again; then both, from 5.
    expect(h.due({ epoch: 1, version: 5 }, 2, all)).toEqual([]);
    expect(h.due({ epoch: 1, version: 6 }, 3, all).map((d) => [d.to, d.from.version])).toEqual([
      ["a", 5],
      ["b", 5],
    ]);
    // A new epoch (our restart) is due to everyone, from what they hold.
    expect(h.due({ epoch: 2, version: 0 }, 4, all).map((d) => d.from)).toEqual([
      { epoch: 1, version: 6 },
      { epoch: 1, version: 6 },
    ]);
  });

  test("holders lapse without renewal, are bounded, and leave with their membership", () => {
    const h = new Holders(2, 10);
    h.note("a", { epoch: 1, version: 0 }, 0);
    h.note("b", { epoch: 1, version: 0 }, 5);
    h.note("c", { epoch: 1, version: 0 }, 5);
    expect(h.size).toBe(2);
    // A renewal of a known holder is always taken (it moves the lease and the cursor).
    h.note("a", { epoch: 1, version: 1 }, 8);
    expect(h.due({ epoch: 1, version: 2 }, 12, all).map((d) => d.to)).toEqual(["a", "b"]);
    // b's lease (5 + 10) is over at round 16; a's (8 + 10) is not.
    expect(h.due({ epoch: 1, version: 3 }, 16, all).map((d) => d.to)).toEqual(["a"]);
    expect(h.size).toBe(1);
    expect(h.due({ epoch: 1, version: 4 }, 16, (id) => id !== "a")).toEqual([]);
    expect(h.size).toBe(0);
  });
});

describe("push to holders: the holder's side", () => {
  test("owners just taken or whose push failed are renewed first (bounded), then the oldest renewed", () => {
    const r = new Renewals();
    const held = new Map<string, unknown>(["a", "b", "c", "d"].map((o) => [o, 0]));
    r.mismatch("c");
    r.mismatch("x"); // no longer held: skipped
    r.mismatch("d");
    expect(r.next(held, 1, 1)).toEqual(["c", "a"]);
    expect(r.next(held, 2, 1)).toEqual(["d", "b"]);
    // No urgent ones: the one renewed longest ago (a and c at round 1; the first found).
    expect(r.next(held, 3, 1)).toEqual(["a"]);
    r.forget("a");
    held.delete("a");
    expect(r.next(held, 4, 1)).toEqual(["c"]);
    expect(r.next(new Map(), 5, 1)).toEqual([]);
  });
});
