/**
 * The experiment's workloads, built identically in the main thread and in every worker from a small
 * serializable description (so workers never receive every request's tokens over postMessage).
 */
import type { Tokens } from "../core/engine.js";
import { mmluWorkload } from "../workload/mmlu-workload.js";
import { syntheticMmlu } from "../workload/synthetic.js";
import type { Workload } from "../workload/types.js";
import { OPEN_LOOP_RATE, OPEN_LOOP_REQUESTS, type WorkloadKind } from "./grid.js";

export type WorkloadSource =
  | { kind: "mmlu"; dir: string; cacheDir?: string }
  /** `scale` shrinks every topic (tests); 1 = MMLU-sized. */
  | { kind: "synthetic"; scale: number };

export interface WorkloadSpec {
  source: WorkloadSource;
  seed: number;
}

const cache = new Map<string, Promise<Workload>>();

export function buildWorkload(spec: WorkloadSpec, kind: WorkloadKind): Promise<Workload> {
  const key = JSON.stringify([spec, kind]);
  let p = cache.get(key);
  if (!p) {
    const skew =
      kind === "uniform"
        ? {}
        : kind === "uniform-open"
          ? { openLoopRate: OPEN_LOOP_RATE, requests: OPEN_LOOP_REQUESTS }
          : { skewed: true as const, repeats: kind === "skewed" };
    p =
      spec.source.kind === "mmlu"
        ? mmluWorkload({
            dir: spec.source.dir,
            seed: spec.seed,
            ...skew,
            ...(spec.source.cacheDir ? { cacheDir: spec.source.cacheDir } : {}),
          })
        : Promise.resolve(syntheticMmlu({ seed: spec.seed, scale: spec.source.scale, ...skew }));
    p.catch(() => cache.delete(key));
    cache.set(key, p);
  }
  return p;
}

/**
 * The shared-prefix working set: for each group, the prefix every one of its prompts shares (the
 * few-shot block), summed over groups. A cache smaller than this cannot hold every subject at once.
 */
export function prefixWorkingSet(w: Workload): number {
  const lcp = new Map<string, Tokens>();
  const len = new Map<string, number>();
  for (const r of w.requests) {
    const first = lcp.get(r.group);
    if (!first) {
      lcp.set(r.group, r.tokens);
      len.set(r.group, r.tokens.length);
      continue;
    }
    let l = Math.min(len.get(r.group)!, r.tokens.length);
    let i = 0;
    while (i < l && first[i] === r.tokens[i]) i++;
    l = i;
    len.set(r.group, l);
  }
  let sum = 0;
  for (const v of len.values()) sum += v;
  return sum;
}

/**
 * Constrained-cache capacity per node: a quarter of the prefix working set, so the four caches
 * together hold every subject's prefix only if routing partitions subjects across nodes; without
 * routing each node cycles all 57 subjects through a cache a quarter of their size.
 */
export const CONSTRAINED_FRACTION = 0.25;

export function constrainedCapacity(uniform: Workload): number {
  return Math.max(1024, Math.round(prefixWorkingSet(uniform) * CONSTRAINED_FRACTION));
}
