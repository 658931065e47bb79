/**
 * The record of cancels that came before their forward (early-cancels.ts) stays within its bounds:
 * in count, in all and per peer (the oldest forgotten first), and in time (on an injected clock), and
 * a cancel covers its own peer's own attempt only.
 */
import { describe, expect, it } from "vitest";
import { EarlyCancels } from "../../src/server/runtime/early-cancels.js";

function record(o: { ttlMs?: number; max?: number; maxPerPeer?: number } = {}) {
  const clock = { t: 1_000 };
  return { clock, early: new EarlyCancels({ now: () => clock.t, ...o }) };
}

describe("early cancels", () => {
  it("match the same peer, request and attempt only", () => {
    const { early } = record();
    early.note("B", "r1", 0);
    expect(early.has("B", "r1", 0)).toBe(true);
    expect(early.has("B", "r1", 1)).toBe(false);
    expect(early.has("C", "r1", 0)).toBe(false);
    expect(early.has("B", "r2", 0)).toBe(false);
    // Kept after a match: a copy of the forward is answered so too.
    expect(early.has("B", "r1", 0)).toBe(true);
  });

  it("expire after the TTL, on the injected clock", () => {
    const { clock, early } = record({ ttlMs: 500 });
    early.note("B", "old", 0);
    clock.t += 300;
    early.note("B", "young", 0);
    clock.t += 199;
    expect(early.has("B", "old", 0)).toBe(true);
    clock.t += 1;
    expect(early.has("B", "old", 0)).toBe(false);
    expect(early.has("B", "young", 0)).toBe(true);
    expect(early.size).toBe(1);
    clock.t += 300;
    expect(early.has("B", "young", 0)).toBe(false);
    expect(early.size).toBe(0);
  });

  it("noted again, a cancel's TTL starts over", () => {
    const { clock, early } = record({ ttlMs: 500 });
    early.note("B", "r", 0);
    clock.t += 400;
    early.note("B", "r", 0);
    clock.t += 400;
    expect(early.has("B", "r", 0)).toBe(true);
    expect(early.size).toBe(1);
  });

  it("hold at most `max` in all, forgetting the oldest", () => {
    const { early } = record({ max: 3, maxPerPeer: 3 });
    for (const [peer, id] of [
      ["B", "1"],
      ["C", "2"],
      ["D", "3"],
      ["E", "4"],
    ] as const)
      early.note(peer, id, 0);
    expect(early.size).toBe(3);
    expect(early.has("B", "1", 0)).toBe(false);
    expect(["2", "3", "4"].map((id, i) => early.has("CDE"[i] as string, id, 0))).toEqual([true, true, true]);
  });

  it("hold at most `maxPerPeer` of one peer: its flood pushes out only its own", () => {
    const { early } = record({ max: 100, maxPerPeer: 4 });
    early.note("C", "theirs", 0);
    for (let i = 0; i < 1_000; i++) early.note("B", `flood-${i}`, 0);
    expect(early.size).toBe(5);
    expect(early.has("C", "theirs", 0)).toBe(true);
    expect(early.has("B", "flood-995", 0)).toBe(false);
    expect(early.has("B", "flood-996", 0)).toBe(true);
    expect(early.has("B", "flood-999", 0)).toBe(true);
  });

  it("a peer's one place, taken over and over, stays one", () => {
    const { early } = record({ max: 2, maxPerPeer: 1 });
    for (let i = 0; i < 10; i++) early.note("B", `r${i}`, i);
    early.note("C", "c", 0);
    expect(early.size).toBe(2);
    expect(early.has("B", "r9", 9)).toBe(true);
    expect(early.has("C", "c", 0)).toBe(true);
  });
});
