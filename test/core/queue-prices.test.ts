/**
 * queue-prices.ts against a naive model: after a job leaves the queue, no job still waiting is priced
 * on a prefix that no job ahead of it supplies any more (its price never undercounts its run), and a
 * queue sharing one long prefix is priced again in one cheap pass, not job by job.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type PricedJob, repriceBehind, sharedPrefix } from "../../src/core/node/queue-prices.js";

const TOKEN_MS = 1;

/** The longest prefix of `queue[i]` that a waiting job ahead of it shares: what it may count as cached. */
function naiveMatch(queue: PricedJob[], i: number): number {
  const key = (queue[i] as PricedJob).request.tokens;
  let m = 0;
  for (let j = 0; j < i; j++) {
    const a = queue[j] as PricedJob;
    if (!a.cancelled) m = Math.max(m, sharedPrefix(a.request.tokens, key));
  }
  return m;
}

function price(queue: PricedJob[], job: PricedJob, i: number): void {
  job.pricedMatch = naiveMatch(queue, i);
  job.workMs = (job.request.tokens.length - job.pricedMatch) * TOKEN_MS;
}

function job(id: string, tokens: number[]): PricedJob {
  return {
    request: { id, tokens: Uint32Array.from(tokens), maxTokens: 1 },
    cancelled: false,
    workMs: 0,
    pricedMatch: 0,
  };
}

/** Prompts from a few families sharing prefixes of different lengths. */
const prompts = fc.array(
  fc.tuple(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 9 })),
  { minLength: 2, maxLength: 30 },
);

describe("repriceBehind", () => {
  it("leaves no waiting job priced on a prefix nobody ahead of it supplies", () => {
    fc.assert(
      fc.property(prompts, fc.nat(), fc.boolean(), (spec, pick, cancel) => {
        const queue = spec.map(([a, b, c], i) =>
          job(`j${i}`, [a, a, a, a, ...(b > 0 ? [10 + b, 10 + b, 10 + b] : [99, i]), 20 + c, 1000 + i]),
        );
        for (const [i, j] of queue.entries()) price(queue, j, i);
        const removed = queue[pick % queue.length] as PricedJob;
        // Cancelled in place, or taken out of the array (moved by offload).
        const after = cancel ? queue : queue.filter((j) => j !== removed);
        if (cancel) removed.cancelled = true;
        const sum = (q: PricedJob[]) => q.reduce((s, j) => s + (j.cancelled ? 0 : j.workMs), 0);
        const before = sum(after);
        const delta = repriceBehind(after, 0, removed, (j, i) => price(after, j, i));
        expect(sum(after)).toBeCloseTo(before + delta, 9);
        after.forEach((j, i) => {
          if (j.cancelled) return;
          expect(j.pricedMatch).toBeLessThanOrEqual(naiveMatch(after, i));
        });
      }),
      { seed: 7, numRuns: 500 },
    );
  });

  it("prices again only the first job behind a removed one when all share its prefix", () => {
    const shared = Array.from({ length: 1500 }, (_, i) => i + 1);
    const queue = Array.from({ length: 1000 }, (_, i) => job(`q${i}`, [...shared, 100_000 + i]));
    for (const [i, j] of queue.entries()) price(queue, j, i);
    const removed = queue[0] as PricedJob;
    removed.cancelled = true;
    let repriced = 0;
    repriceBehind(queue, 0, removed, (j, i) => {
      repriced++;
      price(queue, j, i);
    });
    expect(repriced).toBe(1);
    expect((queue[1] as PricedJob).pricedMatch).toBe(0);
    expect((queue[2] as PricedJob).pricedMatch).toBe(1500);
  });
});
