/** RecentPrefixes: what went to each node lately counts as its match, along the chain, for a window. */
import { describe, expect, it } from "vitest";
import { BLOCK_SIZE } from "../../src/core/block-hash.js";
import { RecentPrefixes } from "../../src/core/node/recent-prefixes.js";

/** `blocks` full blocks of a prompt: `shared` blocks common to every `topic`, then `topic`-specific ones. */
function prompt(topic: number, blocks: number, shared = 0, tail = 0): Uint32Array {
  const t = new Uint32Array(blocks * BLOCK_SIZE + tail);
  for (let i = 0; i < t.length; i++) t[i] = i < shared * BLOCK_SIZE ? 7 + i : 1_000 * (topic + 1) + i;
  return t;
}

describe("RecentPrefixes", () => {
  it("counts a prompt sent to a node as that node's match, in whole blocks", () => {
    const r = new RecentPrefixes(10_000);
    r.record("B", prompt(1, 4, 0, 5), 0);
    expect(r.match(prompt(1, 4, 0, 5), 100).get("B")).toBe(4 * BLOCK_SIZE);
    // A longer prompt with the same first blocks: matched up to where they part.
    expect(r.match(prompt(1, 6), 100).get("B")).toBe(4 * BLOCK_SIZE);
    // Another prompt: nothing.
    expect(r.match(prompt(2, 4), 100).size).toBe(0);
  });

  it("forgets a prompt once the window has passed since it last went anywhere", () => {
    const r = new RecentPrefixes(1_000);
    r.record("B", prompt(1, 3), 0);
    expect(r.match(prompt(1, 3), 1_000).get("B")).toBe(3 * BLOCK_SIZE);
    expect(r.match(prompt(1, 3), 1_001).size).toBe(0);
    // A later forward of the same prompt renews it.
    r.record("B", prompt(1, 3), 900);
    expect(r.match(prompt(1, 3), 1_800).get("B")).toBe(3 * BLOCK_SIZE);
  });

  it("gives shared blocks to the node they last went to, the rest to theirs", () => {
    const r = new RecentPrefixes(10_000);
    r.record("B", prompt(1, 5, 2), 0);
    r.record("C", prompt(2, 5, 2), 10);
    const m = r.match(prompt(1, 5, 2), 20);
    expect(m.get("B")).toBe(5 * BLOCK_SIZE);
    expect(m.get("C")).toBe(2 * BLOCK_SIZE);
    expect(r.match(prompt(3, 5, 2), 20).get("C")).toBe(2 * BLOCK_SIZE);
    expect(r.match(prompt(3, 5, 2), 20).has("B")).toBe(false);
  });

  it("drops a node that is gone, and keeps at most its bound of keys, oldest forgotten first", () => {
    const r = new RecentPrefixes(10_000, 8);
    r.record("B", prompt(1, 4), 0);
    r.record("C", prompt(2, 4), 0);
    expect(r.size).toBe(8);
    r.record("D", prompt(3, 4), 0);
    expect(r.size).toBe(8);
    expect(r.match(prompt(1, 4), 1).size).toBe(0);
    expect(r.match(prompt(3, 4), 1).get("D")).toBe(4 * BLOCK_SIZE);
    r.forget("D");
    expect(r.match(prompt(3, 4), 1).size).toBe(0);
    expect(r.match(prompt(2, 4), 1).get("C")).toBe(4 * BLOCK_SIZE);
    r.clear();
    expect(r.size).toBe(0);
  });
});
