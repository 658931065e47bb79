/** The `--workload` / `--mmlu-dir` choices `prefixmesh sim` and `prefixmesh bench` share. */
import { existsSync } from "node:fs";
import type { Workload } from "../workload/types.js";
import { CliError } from "./errors.js";

export const WORKLOADS = ["synthetic", "mmlu", "mmlu-skewed", "synthetic-skewed"] as const;
export type WorkloadName = (typeof WORKLOADS)[number];

/** Where the MMLU CSVs live in the shared checkout (beside the repository). */
export const DEFAULT_MMLU_DIR = "../shared/datasets/mmlu";

export function parseWorkloadName(raw: string): WorkloadName {
  if (!(WORKLOADS as readonly string[]).includes(raw)) {
    throw new CliError(`--workload must be one of ${WORKLOADS.join(", ")}, got '${raw}'`);
  }
  return raw as WorkloadName;
}

/**
 * The named workload: synthetic (MMLU-shaped), or real MMLU from `dir`; `-skewed` draws the paper's
 * 80/20 hot set. `nodes` spreads the entry nodes, `text` gives synthetic requests prompt text (for the
 * HTTP API), `openLoopRate` schedules Poisson arrivals. A missing or unreadable folder is a usage error.
 */
export async function loadWorkload(
  name: WorkloadName,
  o: { dir: string; seed: number; requests?: number; nodes?: number; text?: boolean; openLoopRate?: number },
): Promise<Workload> {
  const skewed = name.endsWith("-skewed");
  const schedule = {
    seed: o.seed,
    skewed,
    requests: o.requests,
    nodes: o.nodes,
    openLoopRate: o.openLoopRate,
  };
  if (!name.startsWith("mmlu")) {
    const { syntheticMmlu } = await import("../workload/synthetic.js");
    // Text only where a real node's API needs it (bench); its words cost loading GPT-2's ranks.
    const words = o.text ? (await import("../workload/common-words.js")).commonWords() : undefined;
    return syntheticMmlu({ ...schedule, text: words });
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
    throw new CliError(
      `cannot load MMLU from '${o.dir}': ${(err as Error).message} (or use --workload synthetic)`,
    );
  }
}
