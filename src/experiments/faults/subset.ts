/**
 * A subset run of `experiment faults` (`--classes`, `--loops`, `--set`): results.json and a summary
 * table of the latencies, not the report (whose verdicts need every class). For side-by-side runs of a
 * setting, same seed and schedules; the committed report stays the full run's.
 */
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { makeDir } from "../../net/make-dir.js";
import type { FaultsOutcome } from "./run.js";

const s3 = (x: number | undefined) => (x === undefined ? "—" : x.toFixed(3));

/** The summary's text: one row per run, whole run and after the warm-up. */
export function faultsSubsetText(o: FaultsOutcome, command: string): string {
  const rows = o.runs.map(
    (r) =>
      `| ${r.classId} | ${r.loop} | ${r.requests} | ${r.lost} | ${r.wrong} | ${s3(r.p50S)} | ${s3(r.p99S)} | ${s3(r.maxS)} | ${s3(r.afterWarmup?.p99S)} | ${s3(r.afterWarmup?.maxS)} | ${r.duplicateRuns} | ${r.fallbacks} |`,
  );
  return [
    "# Fault classes (subset)",
    "",
    `\`${command}\`, seed ${o.seed}, ${o.requests} requests per run, open loop ${o.openRate} req/s.`,
    "",
    "| class | loop | requests | lost | wrong | p50 s | p99 s | max s | p99 after warm-up s | max after warm-up s | duplicate runs | fallbacks |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ...rows,
    "",
  ].join("\n");
}

export async function writeFaultsSubset(o: FaultsOutcome, command: string, outDir: string): Promise<string> {
  await makeDir(outDir, 0o777, (m) => new Error(m));
  await writeFile(join(outDir, "results.json"), `${JSON.stringify(o, null, 1)}\n`);
  const path = join(outDir, "summary.md");
  await writeFile(path, faultsSubsetText(o, command));
  return path;
}
