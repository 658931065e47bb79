/** What every `prefixmesh experiment …` command checks and records the same way. */
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { CliError } from "./errors.js";

/** An MMLU folder (dev/ and test/ CSVs), as an absolute path; a CLI error otherwise. */
export function checkMmluDir(dir: string, hint = ""): string {
  const abs = resolve(dir);
  if (!existsSync(join(abs, "test")) || !existsSync(join(abs, "dev")))
    throw new CliError(`--mmlu-dir ${dir}: expected dev/ and test/ folders of MMLU CSV files${hint}`);
  return abs;
}

/** The command as a report names it: `prefixmesh experiment <sub>` and the flags it was given. */
export function commandLine(sub: string): string {
  return [`prefixmesh experiment ${sub}`, ...process.argv.slice(3).filter((a) => a !== sub)]
    .join(" ")
    .replace(/\s+/g, " ")
    .trim();
}
