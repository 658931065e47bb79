/** What every `prefixmesh experiment …` command checks and records the same way. */
import { existsSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join, resolve } from "node:path";
import { makeDir } from "../net/make-dir.js";
import { CliError, parseNumber } from "./errors.js";

/** An MMLU folder (dev/ and test/ CSVs), as an absolute path; a CLI error otherwise. */
export function checkMmluDir(dir: string, hint = ""): string {
  const abs = resolve(dir);
  if (!existsSync(join(abs, "test")) || !existsSync(join(abs, "dev")))
    throw new CliError(`--mmlu-dir ${dir}: expected dev/ and test/ folders of MMLU CSV files${hint}`);
  return abs;
}

/**
 * `--out`: made (or found) before the run, so a folder that cannot be made fails at once with exit 2;
 * Node's recursive mkdir would hang on some (/proc), at the end of the run.
 */
export async function makeOutDir(dir: string): Promise<string> {
  const abs = resolve(dir);
  await makeDir(abs, 0o777, (m) => new CliError(`--out: ${m}`));
  return abs;
}

/** The command as a report names it: `prefixmesh experiment <sub>` and the flags it was given. */
export function commandLine(sub: string): string {
  return [`prefixmesh experiment ${sub}`, ...process.argv.slice(3).filter((a) => a !== sub)]
    .join(" ")
    .replace(/\s+/g, " ")
    .trim();
}

/** Worker threads when `--workers` is not given, on a machine with at least as many cores. */
const DEFAULT_WORKERS = 2;

/** `--workers`: worker threads; DEFAULT_WORKERS when not given, or fewer on a machine with fewer cores. */
export function parseWorkers(flag: string | undefined): number {
  return flag === undefined
    ? Math.min(DEFAULT_WORKERS, availableParallelism())
    : parseNumber("--workers", flag, { min: 0, max: 64, integer: true });
}

/**
 * `--synthetic-scale`: the synthetic pool's size relative to MMLU (1 when not given). Refused beside the
 * real MMLU (`instead`: how the command was told to use it), which it would not change.
 */
export function parseSyntheticScale(flag: string | undefined, instead?: string): number {
  if (flag === undefined) return 1;
  if (instead !== undefined)
    throw new CliError(`--synthetic-scale applies only to the synthetic workload, not with ${instead}`);
  return parseNumber("--synthetic-scale", flag, { min: 0.001, max: 10 });
}

/** `--seed`: seeds schedules and the simulator (any 32-bit unsigned integer). */
export function parseSeed(flag: string): number {
  return parseNumber("--seed", flag, { min: 0, max: 2 ** 32 - 1, integer: true });
}
