/**
 * The comparison over several seeds: each run id is run once per seed; the report's tables read the
 * mean over seeds of every figure (a "mean row" per run id), and target 1 also shows the spread of
 * its ratios over the seeds, since one seed cannot tell a loss of a few percent from noise.
 */
import type { CompareResult } from "./execute.js";
import type { Row } from "./rows.js";

/** One run of one seed. */
export type SeedRow = Row & { seed: number };

/** Parses `--seeds`: comma-separated non-negative integers, distinct, at least one. */
export function parseSeeds(text: string): number[] | string {
  const parts = text.split(",").map((s) => s.trim());
  const seeds: number[] = [];
  for (const p of parts) {
    if (!/^\d+$/.test(p) || Number(p) > 2 ** 32 - 1) return `'${p}' is not a seed (0 … 2^32 − 1)`;
    seeds.push(Number(p));
  }
  if (new Set(seeds).size !== seeds.length) return "seeds repeat";
  return seeds;
}

const mean = (xs: readonly number[]) => xs.reduce((a, x) => a + x, 0) / xs.length;

/** The mean over seeds of every figure of a run id's results. */
export function meanResult(rs: readonly CompareResult[]): CompareResult {
  const first = rs[0];
  if (!first) throw new Error("meanResult of no results");
  const m = (f: (r: CompareResult) => number) => mean(rs.map(f));
  const adm = rs.map((r) => r.admitted);
  const admitted = adm.every((a) => a !== undefined)
    ? {
        waitP99S: mean(adm.map((a) => a.waitP99S)),
        waitMaxS: mean(adm.map((a) => a.waitMaxS)),
        overBound: mean(adm.map((a) => a.overBound)),
        refusedOnce: mean(adm.map((a) => a.refusedOnce)),
      }
    : undefined;
  const rates = rs.map((r) => r.rate);
  return {
    id: first.id,
    requests: m((r) => r.requests),
    answered: m((r) => r.answered),
    refused: m((r) => r.refused),
    meanS: m((r) => r.meanS),
    p50S: m((r) => r.p50S),
    p99S: m((r) => r.p99S),
    actualHit: m((r) => r.actualHit),
    idealHit: m((r) => r.idealHit),
    hotspotShare: m((r) => r.hotspotShare),
    forwardedShare: m((r) => r.forwardedShare),
    fallbacks: m((r) => r.fallbacks),
    gossipBytes: m((r) => r.gossipBytes),
    ...(rates.every((x) => x !== undefined) ? { rate: mean(rates) } : {}),
    ...(admitted ? { admitted } : {}),
    wallMs: m((r) => r.wallMs),
  };
}

/** One row per run id (in first-seen order), its result the mean over the seeds it ran on. */
export function meanRows(runs: readonly SeedRow[]): Row[] {
  const by = new Map<string, SeedRow[]>();
  for (const r of runs) {
    const list = by.get(r.run.id);
    if (list) list.push(r);
    else by.set(r.run.id, [r]);
  }
  return [...by.values()].map((list) => ({
    run: (list[0] as SeedRow).run,
    result: meanResult(list.map((r) => r.result)),
  }));
}

/** The runs of each seed, in the order given. */
export function bySeed(runs: readonly SeedRow[], seeds: readonly number[]): Row[][] {
  return seeds.map((s) => runs.filter((r) => r.seed === s));
}
