/** SWIM's piggyback queue (swim/broadcasts.ts) against a whole-queue scan. */
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { Broadcasts, leastSent, type Pending } from "../../src/core/node/swim/broadcasts.js";
import type { MemberUpdate } from "../../src/core/node/swim/types.js";

describe("swim piggyback queue", () => {
  test("picks the k least-sent, newest first, as sorting the whole queue would", () => {
    fc.assert(
      fc.property(fc.array(fc.nat({ max: 5 }), { maxLength: 80 }), fc.nat({ max: 20 }), (sents, k) => {
        const all: Pending[] = sents.map((sent, order) => ({
          update: { id: `m${order}`, status: "alive", incarnation: 0 },
          sent,
          order,
        }));
        const naive = [...all].sort((a, b) => a.sent - b.sent || b.order - a.order).slice(0, k);
        expect(leastSent(all, k)).toEqual(naive);
      }),
    );
  });

  test("the bucketed queue takes what the whole-queue scan took, through pushes, replaces and drops", () => {
    // The reference: the queue as a Map scanned whole per take (the queue before buckets).
    const op = fc.oneof(
      fc.record({ push: fc.nat({ max: 30 }), inc: fc.nat({ max: 3 }) }),
      fc.record({
        max: fc.integer({ min: 1, max: 8 }),
        limit: fc.integer({ min: 1, max: 6 }),
        first: fc.boolean(),
      }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 300 }), (ops) => {
        const q = new Broadcasts();
        const ref = new Map<string, Pending>();
        let order = 0;
        for (const o of ops) {
          if ("push" in o) {
            const u: MemberUpdate = { id: `m${o.push}`, status: "alive", incarnation: o.inc };
            q.push(u);
            ref.set(u.id, { update: u, sent: 0, order: order++ });
            continue;
          }
          // `first` as the buddy system passes it: the queued update of one member (or none queued).
          const first = o.first ? ref.values().next().value?.update : undefined;
          const want: MemberUpdate[] = first === undefined ? [] : [first];
          if (ref.size > 0 && want.length < o.max) {
            for (const p of leastSent(ref.values(), o.max - want.length + (first === undefined ? 0 : 1))) {
              if (want.length >= o.max) break;
              if (p.update === first) continue;
              want.push(p.update);
              if (++p.sent >= o.limit) ref.delete(p.update.id);
            }
          }
          expect(q.take(o.max, o.limit, first)).toEqual(want);
          expect(q.size).toBe(ref.size);
        }
      }),
      { numRuns: 300 },
    );
  });
});
