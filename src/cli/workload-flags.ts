/** The `--workload` / `--mmlu-dir` choices `prefixmesh sim` and `prefixmesh bench` share. */
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
