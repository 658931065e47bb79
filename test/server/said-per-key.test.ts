import { describe, expect, it } from "vitest";
import { SaidPerKey } from "../../src/server/runtime/said-per-key.js";

describe("SaidPerKey", () => {
  it("says a key once per window, with the count held back since", () => {
    const s = new SaidPerKey(60_000);
    expect(s.take("a", 0)).toBe(0);
    expect(s.take("a", 1_000)).toBeUndefined();
    expect(s.take("a", 59_999)).toBeUndefined();
    expect(s.take("b", 30_000)).toBe(0);
    expect(s.take("a", 60_000)).toBe(2);
    expect(s.take("a", 60_001)).toBeUndefined();
  });

  it("asks without taking: due tells, and nothing is held back", () => {
    const s = new SaidPerKey(1_000);
    expect(s.due("a", 0)).toBe(true);
    s.take("a", 0);
    expect(s.due("a", 999)).toBe(false);
    expect(s.due("a", 1_000)).toBe(true);
    expect(s.take("a", 1_000)).toBe(0);
  });

  it("drops keys past their window with nothing held back, keeps a held count until said", () => {
    const s = new SaidPerKey(1_000);
    for (let i = 0; i < 20; i++) s.take(`gone-${i}`, 0);
    s.take("held", 0);
    s.take("held", 10);
    expect(s.size).toBe(21);
    s.take("z", 5_000);
    expect(s.size).toBe(2);
    expect(s.take("held", 6_000)).toBe(1);
  });

  it("holds at most maxKeys, the oldest going first; a forgotten key is said at once", () => {
    const s = new SaidPerKey(60_000, 3);
    for (const k of ["a", "b", "c", "d"]) s.take(k, 0);
    expect(s.size).toBe(3);
    expect(s.due("a", 1)).toBe(true);
    expect(s.due("d", 1)).toBe(false);
    s.forget("d");
    expect(s.take("d", 2)).toBe(0);
  });
});
