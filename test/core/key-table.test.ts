import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { KeyTable, keyHi, keyLo } from "../../src/core/key-table.js";

describe("KeyTable vs Map", () => {
  it("insert / find / remove agree with a Map under heavy collisions, growth and backward-shift deletion", () => {
    // keys over a tiny lo range collide constantly in a small table
    const arbKey = fc.tuple(fc.integer({ min: 0, max: 63 }), fc.integer({ min: 0, max: 3 }));
    const arbOp = fc.tuple(fc.boolean(), arbKey, fc.nat({ max: 65 }));
    fc.assert(
      fc.property(fc.array(arbOp, { maxLength: 200 }), (ops) => {
        const t = new KeyTable(3, 16);
        const ref = new Map<string, number[]>();
        for (const [add, [lo, hi], bit] of ops) {
          const k = `${lo}:${hi}`;
          if (add) {
            const pos = t.insert(lo * 16, hi); // multiples of 16: same home slot at small sizes
            t.setBit(pos, bit);
            const bits = ref.get(k) ?? [];
            if (!bits.includes(bit)) bits.push(bit);
            ref.set(k, bits);
          } else {
            const pos = t.find(lo * 16, hi);
            expect(pos >= 0).toBe(ref.has(k));
            if (pos >= 0) {
              t.removeAt(pos);
              ref.delete(k);
            }
          }
          expect(t.size).toBe(ref.size);
        }
        const got: string[] = [];
        const want: string[] = [];
        for (let lo = 0; lo < 64; lo++) {
          for (let hi = 0; hi < 4; hi++) {
            const pos = t.find(lo * 16, hi);
            const bits = ref.get(`${lo}:${hi}`);
            if (bits !== undefined) want.push(`${lo}:${hi}=${[...bits].sort((a, b) => a - b).join(",")}`);
            if (pos < 0) continue;
            const set: number[] = [];
            for (let b = 0; b < 96; b++) if ((t.word(pos, b >>> 5) & (1 << (b & 31))) !== 0) set.push(b);
            got.push(`${lo}:${hi}=${set.join(",")}`);
          }
        }
        expect(got).toEqual(want);
      }),
      { numRuns: 1000 },
    );
  });
});

describe("KeyTable.reserve", () => {
  it("sizes the table once for n keys, keeping every key and its bits", () => {
    const t = new KeyTable(1, 16);
    for (let k = 0; k < 5; k++) t.setBit(t.insert(k, 1), 0);
    t.reserve(5000);
    const data = t.data;
    for (let k = 5; k < 5000; k++) t.insert(k, 1);
    // No resize happened while inserting: the same backing array.
    expect(t.data).toBe(data);
    expect(t.size).toBe(5000);
    for (let k = 0; k < 5; k++) expect(t.word(t.find(k, 1), 0)).toBe(1);
    t.reserve(10);
    expect(t.data).toBe(data);
  });
});

describe("KeyTable.keys and clone", () => {
  it("keys() gives back every 48-bit key split by keyLo/keyHi; a clone changes apart from its source", () => {
    const keys = [0, 1, 2 ** 32 - 1, 2 ** 32, 2 ** 47 + 12345, 2 ** 48 - 1];
    const t = new KeyTable(1, 16);
    for (const k of keys) t.setBit(t.insert(keyLo(k), keyHi(k)), 0);
    expect([...t.keys()].sort((a, b) => a - b)).toEqual(keys);
    const c = t.clone();
    c.removeAt(c.find(keyLo(keys[0] as number), keyHi(keys[0] as number)));
    c.insert(keyLo(7), keyHi(7));
    expect(t.size).toBe(keys.length);
    expect(t.find(keyLo(7), keyHi(7))).toBe(-1);
    expect(c.size).toBe(keys.length);
    const pos = c.find(keyLo(2 ** 32), keyHi(2 ** 32));
    expect(pos).toBeGreaterThanOrEqual(0);
    expect(c.word(pos, 0) & 1).toBe(1);
  });
});
