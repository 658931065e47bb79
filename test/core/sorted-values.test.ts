import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { SortedValues } from "../../src/core/sorted-values.js";

/** The median as typicalRttMs computed it before: sort a copy on every read. */
function sortedMedian(values: number[]): number | undefined {
  const v = [...values].sort((a, b) => a - b);
  const m = v.length >> 1;
  if (v.length === 0) return undefined;
  return v.length % 2 ? v[m] : ((v[m - 1] as number) + (v[m] as number)) / 2;
}

describe("SortedValues", () => {
  it("gives the median a sort would, after any sequence of adds and deletes", () => {
    const op = fc.oneof(
      fc.record({ add: fc.double({ min: 0, max: 1e4, noNaN: true }) }),
      fc.record({ del: fc.nat(20) }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), (ops) => {
        const s = new SortedValues();
        const ref: number[] = [];
        for (const o of ops) {
          if ("add" in o) {
            s.add(o.add);
            ref.push(o.add);
          } else if (ref.length > 0) {
            const [x] = ref.splice(o.del % ref.length, 1);
            expect(s.delete(x as number)).toBe(true);
          }
          expect(s.size).toBe(ref.length);
          expect(s.median()).toBe(sortedMedian(ref));
        }
      }),
    );
  });

  it("deletes one copy of a repeated value, and reports a value it does not hold", () => {
    const s = new SortedValues();
    for (const x of [3, 1, 3, 2]) s.add(x);
    expect(s.median()).toBe(2.5);
    expect(s.delete(3)).toBe(true);
    expect(s.median()).toBe(2);
    expect(s.delete(7)).toBe(false);
    s.clear();
    expect(s.median()).toBeUndefined();
  });
});
