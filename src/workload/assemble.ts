/**
 * Turns a pool of prompts (grouped by subject/topic) plus a schedule choice into a Workload: the one
 * place MMLU and synthetic workloads share, so both schedule identically for a given seed.
 */
import type { Tokens } from "../core/engine.js";
import { Prng } from "../core/prng.js";
import {
  describeSkew,
  poissonArrivals,
  resolveSkew,
  type SkewOptions,
  skewedSchedule,
  uniformSchedule,
} from "./schedule.js";
import type { Workload, WorkloadMeta, WorkloadRequest } from "./types.js";

export interface PoolItem {
  /** Stable id of the prompt (e.g. "anatomy/12"). */
  id: string;
  group: string;
  tokens: Tokens;
  prompt?: string;
  /** Tokens of the group's shared prefix at the start of `tokens`, when the pool knows it (synthetic). */
  prefixLength?: number;
}

export interface ScheduleChoice {
  seed: number;
  /** false/undefined: uniform; true: the paper's hot-set 80/20 with repeats; or explicit options. */
  skewed?: boolean | Partial<SkewOptions>;
  /** Overrides `repeats` of the skew (ignored for uniform unless requests exceed the pool). */
  repeats?: boolean;
  /** Number of requests (default: the whole pool for uniform / skew with repeats). */
  requests?: number;
  /** Open-loop Poisson arrivals at this rate (requests/s); absent = closed loop (the paper). */
  openLoopRate?: number;
  /** Fix entry nodes round-robin over this many nodes (else the runner assigns round-robin). */
  nodes?: number;
  maxTokens?: number;
}

/**
 * A workload's name from its pool and schedule: `mmlu`, `mmlu-skewed` (hot set), `mmlu-zipf`; the
 * CLI's `--workload` names, so a report always says which schedule it ran.
 */
export function scheduleName(base: string, skewed: ScheduleChoice["skewed"]): string {
  if (!skewed) return base;
  if (skewed !== true && skewed.kind === "zipf") return `${base}-zipf`;
  return `${base}-skewed`;
}

export function assembleWorkload(
  name: string,
  source: WorkloadMeta["source"],
  items: readonly PoolItem[],
  choice: ScheduleChoice,
  extra: { encoding?: string } = {},
): Workload {
  if (items.length === 0) throw new RangeError(`workload '${name}' has no prompts`);
  if (choice.requests !== undefined && !(Number.isInteger(choice.requests) && choice.requests >= 1)) {
    throw new RangeError(`requests must be a positive integer, got ${choice.requests}`);
  }
  // Separate streams so changing e.g. the arrival process never changes the order.
  const root = new Prng(choice.seed);
  const orderRng = root.fork();
  const arrivalRng = root.fork();

  const groupNames = [...new Set(items.map((it) => it.group))];
  const groupIndex = new Map(groupNames.map((g, i) => [g, i]));
  const pool: number[][] = groupNames.map(() => []);
  items.forEach((it, i) => {
    pool[groupIndex.get(it.group)!]!.push(i);
  });

  let skew = resolveSkew(choice.skewed);
  if (skew && choice.repeats !== undefined) skew = { ...skew, repeats: choice.repeats };
  const sched = skew
    ? skewedSchedule(pool, skew, orderRng, choice.requests)
    : uniformSchedule(items.length, orderRng, choice.requests);

  const arrivals =
    choice.openLoopRate !== undefined
      ? poissonArrivals(sched.order.length, choice.openLoopRate, arrivalRng)
      : undefined;
  const seen = new Set<number>();
  let repeated = 0;
  let tokenSum = 0;
  const requests: WorkloadRequest[] = sched.order.map((itemIdx, i) => {
    const it = items[itemIdx]!;
    if (seen.has(itemIdx)) repeated++;
    else seen.add(itemIdx);
    tokenSum += it.tokens.length;
    const r: WorkloadRequest = {
      id: `r${i}:${it.id}`,
      tokens: it.tokens,
      group: it.group,
      maxTokens: choice.maxTokens ?? 1,
    };
    if (it.prompt !== undefined) r.prompt = it.prompt;
    if (choice.nodes !== undefined) r.entry = i % choice.nodes;
    if (arrivals) r.arrivalMs = arrivals[i]!;
    return r;
  });

  const meta: WorkloadMeta = {
    source,
    schedule: describeSkew(skew),
    seed: choice.seed,
    meanPromptTokens: requests.length > 0 ? tokenSum / requests.length : 0,
    poolSize: items.length,
    repeatedRequests: repeated,
  };
  if (extra.encoding) meta.encoding = extra.encoding;
  if (skew) meta.hotGroups = sched.hotGroups.map((g) => groupNames[g]!);
  return {
    name,
    synthetic: source === "synthetic",
    requests,
    arrival: arrivals ? "open-loop" : "closed-loop",
    meta,
  };
}
