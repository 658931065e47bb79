/** The `--workload` / `--mmlu-dir` choices `prefixmesh sim` and `prefixmesh bench` share. */
import { existsSync } from "node:fs";
import type { Command } from "commander";
import { DEFAULT_ZIPF_S, MAX_ZIPF_S, type SkewOptions } from "../workload/schedule.js";
import type { Workload } from "../workload/types.js";
import { CliError, parseNumber } from "./errors.js";

export const WORKLOADS = [
  "synthetic",
  "mmlu",
  "mmlu-skewed",
  "synthetic-skewed",
  "mmlu-zipf",
  "synthetic-zipf",
] as const;
export type WorkloadName = (typeof WORKLOADS)[number];

/** Where the MMLU CSVs live in the shared checkout (beside the repository). */
export const DEFAULT_MMLU_DIR = "../shared/datasets/mmlu";

export function parseWorkloadName(raw: string): WorkloadName {
  if (!(WORKLOADS as readonly string[]).includes(raw)) {
    throw new CliError(`--workload must be one of ${WORKLOADS.join(", ")}, got '${raw}'`);
  }
  return raw as WorkloadName;
}

/** The raw schedule flags, as commander hands them over (see addWorkloadOptions). */
export interface WorkloadFlagValues {
  zipfS?: string;
  /** `--no-repeats` sets this to false; commander's default is true. */
  repeats?: boolean;
}

/** A checked workload choice: the name plus its schedule parameters. */
export interface WorkloadChoice {
  name: WorkloadName;
  /** The skew, for the skewed and Zipf workloads. */
  skew?: Partial<SkewOptions>;
}

const isZipf = (n: WorkloadName) => n.endsWith("-zipf");
const isSkewed = (n: WorkloadName) => n.endsWith("-skewed") || isZipf(n);

/** The schedule flags both commands take, with their help. */
export function addWorkloadOptions(cmd: Command): Command {
  return cmd
    .option(
      "--zipf-s <s>",
      `Zipf exponent for the *-zipf workloads: P(subject of rank k) ∝ k^-s, s in (0, ${MAX_ZIPF_S}] (default ${DEFAULT_ZIPF_S})`,
    )
    .option(
      "--no-repeats",
      "skewed and Zipf workloads: draw each question at most once (default: with replacement, so questions repeat)",
    );
}

/** Checks the name and every schedule flag against it: a flag the workload cannot use is an error. */
export function parseWorkloadChoice(rawName: string, f: WorkloadFlagValues): WorkloadChoice {
  const name = parseWorkloadName(rawName);
  if (f.zipfS !== undefined && !isZipf(name)) {
    throw new CliError(
      `--zipf-s applies only to the Zipf workloads (mmlu-zipf, synthetic-zipf), not '${name}'`,
    );
  }
  if (f.repeats === false && !isSkewed(name)) {
    throw new CliError(`--no-repeats applies only to the skewed and Zipf workloads, not '${name}'`);
  }
  const choice: WorkloadChoice = { name };
  const repeats = f.repeats !== false;
  if (isZipf(name)) {
    const s =
      f.zipfS === undefined ? DEFAULT_ZIPF_S : parseNumber("--zipf-s", f.zipfS, { min: 0, max: MAX_ZIPF_S });
    if (!(s > 0)) throw new CliError(`--zipf-s must be > 0, got ${f.zipfS}`);
    choice.skew = { kind: "zipf", s, repeats };
  } else if (isSkewed(name)) {
    choice.skew = { kind: "hot-set", repeats };
  }
  return choice;
}

/**
 * The named workload: synthetic (MMLU-shaped), or real MMLU from `dir`; `-skewed` draws the paper's
 * 80/20 hot set, `-zipf` a Zipf skew over subjects. `nodes` spreads the entry nodes, `text` gives
 * synthetic requests prompt text (for the HTTP API), `openLoopRate` schedules Poisson arrivals. A
 * missing or unreadable folder, or a schedule the pool cannot hold, is a usage error.
 */
export async function loadWorkload(
  choice: WorkloadName | WorkloadChoice,
  o: { dir: string; seed: number; requests?: number; nodes?: number; text?: boolean; openLoopRate?: number },
): Promise<Workload> {
  const c: WorkloadChoice = typeof choice === "string" ? parseWorkloadChoice(choice, {}) : choice;
  const schedule = {
    seed: o.seed,
    ...(c.skew ? { skewed: c.skew } : {}),
    requests: o.requests,
    nodes: o.nodes,
    openLoopRate: o.openLoopRate,
  };
  if (!c.name.startsWith("mmlu")) {
    const { syntheticMmlu } = await import("../workload/synthetic.js");
    try {
      return syntheticMmlu({ ...schedule, text: o.text });
    } catch (err) {
      throw scheduleError(c.name, err);
    }
  }
  if (!existsSync(o.dir)) {
    throw new CliError(
      `MMLU data not found at '${o.dir}' (pass --mmlu-dir DIR, or use --workload synthetic)`,
    );
  }
  const { mmluWorkload } = await import("../workload/mmlu-workload.js");
  try {
    return await mmluWorkload({ ...schedule, dir: o.dir });
  } catch (err) {
    if (err instanceof RangeError) throw scheduleError(c.name, err);
    throw new CliError(
      `cannot load MMLU from '${o.dir}': ${(err as Error).message} (or use --workload synthetic)`,
    );
  }
}

/** A schedule the pool cannot satisfy (e.g. more requests than questions without repeats): bad usage. */
function scheduleError(name: string, err: unknown): Error {
  return err instanceof RangeError ? new CliError(`--workload ${name}: ${err.message}`) : (err as Error);
}
