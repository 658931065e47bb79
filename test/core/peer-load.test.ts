/**
 * Fresh peer load (`freshPeerLoad`): acks and answers carry the server's queue depth; an origin
 * counts its forwards in flight to each peer until they are acked, answered or given up.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MAX_REPORTED_DEPTH, reportedDepth, stampQueueDepth } from "../../src/core/node/peer-load.js";
import { Targets } from "../../src/core/node/targets.js";
import type { Effect, PeerMessage } from "../../src/core/node/types.js";
import { runSimulation } from "../../src/sim/run.js";
import { smallCluster, tinyWorkload } from "../sim/helpers.js";

describe("peer load on acks and answers", () => {
  it("stamps acks and answers only, with new message objects", () => {
    const ack: PeerMessage = { type: "forward-ack", reqId: "a", attempt: 1 };
    const cancel: PeerMessage = { type: "cancel", reqId: "a", attempt: 1 };
    const out: Effect[] = [
      { type: "send", to: "p", msg: ack },
      { type: "send", to: "p", msg: cancel },
    ];
    stampQueueDepth(out, 7);
    const [a, c] = out as Extract<Effect, { type: "send" }>[];
    expect(a?.msg).toEqual({ ...ack, queueDepth: 7 });
    expect(a?.msg).not.toBe(ack);
    expect(ack).not.toHaveProperty("queueDepth");
    expect(c?.msg).toBe(cancel);
  });

  it("reads only a sane, bounded depth a peer sent", () => {
    const ack = (d: unknown) =>
      ({ type: "forward-ack", reqId: "a", attempt: 1, queueDepth: d }) as PeerMessage;
    expect(reportedDepth(ack(3))).toBe(3);
    for (const bad of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, MAX_REPORTED_DEPTH + 1, "3", undefined])
      expect(reportedDepth(ack(bad))).toBeUndefined();
    expect(reportedDepth({ type: "cancel", reqId: "a", attempt: 1 })).toBeUndefined();
  });
});

describe("forwards in flight", () => {
  it("match a naive model: sent minus landed, minus those older than the age limit", () => {
    const ops = fc.array(
      fc.oneof(
        fc.record({ op: fc.constant("send" as const), req: fc.integer({ min: 0, max: 9 }), dt: fc.nat(50) }),
        fc.record({ op: fc.constant("land" as const), req: fc.integer({ min: 0, max: 9 }), dt: fc.nat(50) }),
        fc.record({ op: fc.constant("ack" as const), req: fc.integer({ min: 0, max: 9 }), dt: fc.nat(50) }),
      ),
      { maxLength: 60 },
    );
    fc.assert(
      fc.property(ops, fc.integer({ min: 1, max: 200 }), (list, maxAge) => {
        const t = new Targets();
        t.reset(["p"]);
        const model = new Map<string, number>();
        let now = 0;
        for (const o of list) {
          now += o.dt;
          const key = `r${o.req}`;
          if (o.op === "send") {
            // A new attempt of the same request is a new key in the real code; here one per request.
            if (model.has(key)) continue;
            t.sent("p", key, 1, now);
            model.set(key, now);
          } else if (o.op === "land") {
            t.landed("p", key, 1);
            model.delete(key);
          } else {
            t.acked("p", key, 1);
            model.delete(key);
          }
          for (const [k, at] of model) if (now - at > maxAge) model.delete(k);
          expect(t.inFlightTo("p", now, maxAge)).toBe(model.size);
        }
      }),
      { numRuns: 300 },
    );
  });

  it("a seeded open-loop simulation with freshPeerLoad answers everything once, correctly, invariants held", () => {
    const w = tinyWorkload({
      seed: 9,
      requests: 200,
      topics: 5,
      prefix: 80,
      arrival: "open-loop",
      gapMs: 20,
    });
    for (const policy of ["cost-aware", "centralized", "least-loaded"] as const) {
      const r = runSimulation(
        smallCluster({
          policy,
          seed: 4,
          checkInvariants: true,
          settleMs: 400,
          node: { freshPeerLoad: true },
        }),
        w,
      );
      expect(r.invariantViolations).toEqual([]);
      expect(r.totals.answered).toBe(200);
      expect(r.totals.incorrect).toBe(0);
      expect(r.totals.duplicateReplies).toBe(0);
    }
  });
});
