/**
 * One conformance suite, run against every policy in ALL_POLICY_NAMES (the shipped default and the
 * simulation-only baselines included):
 * the contract the origin relies on when it turns a policy's order into a plan, checked on random
 * candidate lists, plus a small seeded simulation per policy with every invariant checked.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  ALL_POLICY_NAMES,
  type Candidate,
  createPolicy,
  type RoutingContext,
} from "../../src/core/node/policies/index.js";
import { planFromOrder } from "../../src/core/node/routing.js";
import { Prng } from "../../src/core/prng.js";
import { runSimulation } from "../../src/sim/run.js";
import { smallCluster, tinyWorkload } from "../sim/helpers.js";

/** 1-8 candidates, exactly one of them self (at any position), with arbitrary figures. */
const candidatesArb = fc
  .array(
    fc.record({
      match: fc.integer({ min: 0, max: 400 }),
      age: fc.integer({ min: 0, max: 10_000 }),
      queue: fc.integer({ min: 0, max: 20 }),
      queueAge: fc.option(fc.integer({ min: 0, max: 5_000 }), { nil: undefined }),
      sent: fc.integer({ min: 0, max: 5 }),
      tree: fc.option(fc.integer({ min: 0, max: 1_000 }), { nil: undefined }),
      rtt: fc.option(fc.double({ min: 0, max: 500, noNaN: true }), { nil: undefined }),
    }),
    { minLength: 1, maxLength: 8 },
  )
  .chain((raw) =>
    fc.integer({ min: 0, max: raw.length - 1 }).map((selfAt) =>
      raw.map(
        (r, i): Candidate => ({
          id: `n${(i * 7) % 11}-${i}`,
          self: i === selfAt,
          estimatedMatch: r.match,
          estimateAgeMs: i === selfAt ? 0 : r.age,
          queueDepth: r.queue,
          queueAgeMs: i === selfAt ? 0 : r.queueAge,
          sentSinceQueue: i === selfAt ? 0 : r.sent,
          rttMs: i === selfAt ? 0 : r.rtt,
          capacityTokens: 1_000,
          ...(r.tree === undefined ? {} : { treeTokens: r.tree }),
        }),
      ),
    ),
  );

const contextArb = fc.record({
  seed: fc.integer({ min: 1, max: 1_000_000 }),
  prompt: fc.integer({ min: 1, max: 500 }),
  fixed: fc.double({ min: 0, max: 200, noNaN: true }),
  perToken: fc.double({ min: 0, max: 5, noNaN: true }),
  service: fc.double({ min: 0, max: 1_000, noNaN: true }),
  reuse: fc.option(fc.double({ min: 0, max: 50, noNaN: true }), { nil: undefined }),
});

type ContextSpec = typeof contextArb extends fc.Arbitrary<infer T> ? T : never;

function ctxOf(c: ContextSpec): RoutingContext {
  const r = new Prng(c.seed);
  return {
    promptTokens: c.prompt,
    now: 0,
    random: () => r.next(),
    costs: {
      prefillFixedMs: c.fixed,
      prefillMsPerToken: c.perToken,
      serviceMs: c.service,
      rttPriorMs: 250,
      samples: 10,
    },
    expectedReuse: c.reuse,
  };
}

const selfAt = (cands: readonly Candidate[]): number => cands.findIndex((c) => c.self);
const RUNS = { numRuns: 300 };

describe.each(ALL_POLICY_NAMES)("policy %s", (name) => {
  it("orders distinct candidate indexes, self among them; ranks no peer that was not a candidate", () => {
    fc.assert(
      fc.property(candidatesArb, contextArb, (cands, c) => {
        const order = createPolicy(name).rank(cands, ctxOf(c));
        expect(order).toContain(selfAt(cands));
        expect(new Set(order).size).toBe(order.length);
        for (const i of order) {
          expect(Number.isInteger(i)).toBe(true);
          expect(i).toBeGreaterThanOrEqual(0);
          expect(i).toBeLessThan(cands.length);
        }
        const ids = new Set(cands.map((x) => x.id));
        for (const id of planFromOrder(order, cands, [])) expect(ids.has(id)).toBe(true);
      }),
      RUNS,
    );
  });

  it("nothing after self matters: the plan is the peers ranked before self", () => {
    fc.assert(
      fc.property(candidatesArb, contextArb, (cands, c) => {
        const order = createPolicy(name).rank(cands, ctxOf(c));
        const head = order.slice(0, order.indexOf(selfAt(cands)) + 1);
        const plan = planFromOrder(order, cands, []);
        expect(plan).toEqual(head.slice(0, -1).map((i) => (cands[i] as Candidate).id));
        // Whatever follows self (another order of the rest, or nothing) gives the same plan.
        const rest = cands.map((_, i) => i).filter((i) => !head.includes(i));
        expect(planFromOrder([...head, ...rest.reverse()], cands, [])).toEqual(plan);
        expect(planFromOrder(head, cands, [])).toEqual(plan);
        expect(plan).not.toContain((cands[selfAt(cands)] as Candidate).id);
      }),
      RUNS,
    );
  });

  it("a self-only cluster gets [self]", () => {
    fc.assert(
      fc.property(candidatesArb, contextArb, (cands, c) => {
        const self = cands[selfAt(cands)] as Candidate;
        expect(createPolicy(name).rank([self], ctxOf(c))).toEqual([0]);
      }),
      RUNS,
    );
  });

  it("is deterministic for the same injected random (a fresh policy, call after call)", () => {
    fc.assert(
      fc.property(fc.array(candidatesArb, { minLength: 1, maxLength: 5 }), contextArb, (lists, c) => {
        const a = createPolicy(name);
        const b = createPolicy(name);
        const ca = ctxOf(c);
        const cb = ctxOf(c);
        for (const cands of lists) expect(a.rank(cands, ca)).toEqual(b.rank(cands, cb));
      }),
      RUNS,
    );
  });

  it("keeps to what it declares: a local-only policy never puts a peer first; demand is read only if declared", () => {
    const policy = createPolicy(name);
    expect(typeof policy.needs.peers).toBe("boolean");
    expect(typeof policy.needs.demand).toBe("boolean");
    fc.assert(
      fc.property(candidatesArb, contextArb, (cands, c) => {
        const order = policy.rank(cands, ctxOf(c));
        if (!policy.needs.peers) expect(order[0]).toBe(selfAt(cands));
        if (!policy.needs.demand) {
          const without = createPolicy(name).rank(cands, { ...ctxOf(c), expectedReuse: undefined });
          expect(createPolicy(name).rank(cands, ctxOf(c))).toEqual(without);
        }
      }),
      RUNS,
    );
  });

  it("a small seeded simulation answers every request exactly once, correctly, with no invariant broken", () => {
    const w = tinyWorkload({ seed: 11, requests: 120, topics: 6, prefix: 80 });
    const r = runSimulation(
      smallCluster({ policy: name, seed: 3, checkInvariants: true, settleMs: 400, capacityTokens: 600 }),
      w,
    );
    expect(r.invariantViolations).toEqual([]);
    expect(r.totals.answered).toBe(120);
    expect(r.totals.failed).toBe(0);
    expect(r.totals.incorrect).toBe(0);
    expect(r.totals.duplicateReplies).toBe(0);
    if (!createPolicy(name).needs.peers) expect(r.totals.forwardedShare).toBe(0);
  });
});
