/** `prefixmesh experiment faults`: every fault class in the daemon's configuration, as a report. */

import { availableParallelism, loadavg } from "node:os";
import type { Command } from "commander";
import { nodeConfigSchema } from "../core/node/config.js";
import { MEASURED_REQUESTS } from "../experiments/faults/classes.js";
import type { Loop } from "../experiments/faults/measure.js";
import { droppedKeys } from "./dropped-keys.js";
import { CliError, parseNumber } from "./errors.js";
import { checkMmluDir, commandLine, makeOutDir, parseSeed, parseSyntheticScale } from "./experiment-args.js";
import { DEFAULT_MMLU_DIR } from "./workload-flags.js";

interface FaultsFlags {
  mmluDir?: string;
  synthetic?: boolean;
  syntheticScale?: string;
  out: string;
  seed: string;
  requests?: string;
  rate?: string;
  quick?: boolean;
  classes?: string;
  loops?: string;
  set?: string[];
}

/** `--set key=value`: a node setting over the daemon's (JSON values: true, 256; else a string). */
function parseSets(sets: readonly string[] | undefined): Record<string, unknown> | undefined {
  if (sets === undefined || sets.length === 0) return undefined;
  const out: Record<string, unknown> = {};
  for (const kv of sets) {
    const i = kv.indexOf("=");
    const key = i > 0 ? kv.slice(0, i) : "";
    if (!(key in nodeConfigSchema.shape)) throw new CliError(`--set ${kv}: not a node setting`);
    const raw = kv.slice(i + 1);
    let value: unknown = raw;
    try {
      value = JSON.parse(raw);
    } catch {}
    const r = nodeConfigSchema.shape[key as keyof typeof nodeConfigSchema.shape].safeParse(value);
    if (!r.success) throw new CliError(`--set ${kv}: ${r.error.issues.map((x) => x.message).join("; ")}`);
    const unknown = droppedKeys(value, r.data, key);
    if (unknown.length > 0) throw new CliError(`--set ${kv}: not a node setting: ${unknown.join(", ")}`);
    out[key] = r.data;
  }
  return out;
}

function parseLoops(list: string | undefined): Loop[] | undefined {
  if (list === undefined) return undefined;
  const loops = list.split(",").map((x) => x.trim());
  for (const l of loops)
    if (l !== "closed" && l !== "open") throw new CliError(`--loops: ${l} is not closed or open`);
  return loops as Loop[];
}

/** The open-loop arrival rate, requests/s. */
const DEFAULT_OPEN_RATE = 6;

/** Requests per run of `--quick` (a structural check in seconds, not a measurement). */
export const QUICK_REQUESTS = 300;

export function registerExperimentFaults(exp: Command): void {
  exp
    .command("faults")
    .description(
      "Run every simulator fault class (crash, loss, duplication, reordering, partitions, wrong failure detector, slow nodes, stalling/lying/refusing peers, an unbounded request) in the daemon's configuration, closed and open loop; writes report.md, results.json and a figure",
    )
    .option("--mmlu-dir <dir>", `MMLU CSV folder with dev/ and test/ (default ${DEFAULT_MMLU_DIR})`)
    .option("--synthetic", "use the synthetic MMLU-shaped workload instead of MMLU")
    .option("--synthetic-scale <x>", "synthetic pool size relative to MMLU (with --synthetic; default 1)")
    // Not docs/results: a --quick or subset run must not overwrite the committed report (pass --out).
    .option("--out <dir>", "output folder", "out/faults")
    .option("--seed <n>", "seed for schedules and the simulator", "1")
    .option(
      "--requests <n>",
      `requests per run and loop (default ${MEASURED_REQUESTS}; --quick: ${QUICK_REQUESTS})`,
    )
    .option("--rate <req/s>", `open-loop Poisson arrival rate (default ${DEFAULT_OPEN_RATE})`)
    .option("--quick", `a fast structural run (${QUICK_REQUESTS} requests per run): not a measurement`)
    .option(
      "--classes <ids>",
      "only these classes (comma-separated ids, e.g. slow-10x,loss-30) beside the fault-free run: writes results.json and summary.md, not the report",
    )
    .option("--loops <list>", "only these loops (closed, open; comma-separated): a subset, as --classes")
    .option(
      "--set <key=value...>",
      "a node setting over the daemon's in every run (e.g. pushBackByCache=false): a subset, as --classes",
    )
    .action(async (flags: FaultsFlags) => {
      const seed = parseSeed(flags.seed);
      const requests =
        flags.requests === undefined
          ? flags.quick
            ? QUICK_REQUESTS
            : MEASURED_REQUESTS
          : parseNumber("--requests", flags.requests, { min: 50, max: 1_000_000, integer: true });
      const openRate =
        flags.rate === undefined
          ? DEFAULT_OPEN_RATE
          : parseNumber("--rate", flags.rate, { min: 0.01, max: 100_000 });
      const scale = parseSyntheticScale(
        flags.syntheticScale,
        flags.synthetic === true ? undefined : "MMLU (pass --synthetic)",
      );
      // The default folder is applied here so that a typed one beside --synthetic, which reads none, is told.
      if (flags.synthetic === true && flags.mmluDir !== undefined)
        throw new CliError("--mmlu-dir and --synthetic: give one of them (--synthetic reads no MMLU)");
      const mmluDir =
        flags.synthetic === true
          ? undefined
          : checkMmluDir(flags.mmluDir ?? DEFAULT_MMLU_DIR, " (or pass --synthetic)");
      const command = commandLine("faults");
      const loadBefore = loadavg()[0] ?? 0;
      const classes = flags.classes?.split(",").map((x) => x.trim());
      const loops = parseLoops(flags.loops);
      // The rate paces the open loop only: with the closed loop alone it would be silently unused.
      if (flags.rate !== undefined && loops !== undefined && !loops.includes("open"))
        throw new CliError("--rate applies only to the open loop; --loops closed runs none");
      const node = parseSets(flags.set);
      const subset = classes !== undefined || loops !== undefined || node !== undefined;
      const outDir = await makeOutDir(flags.out);
      try {
        const { runFaults } = await import("../experiments/faults/run.js");
        // Before the run, as compare and scale load theirs: a drawing (resvg's native binary) that
        // cannot load fails now, not after minutes of runs.
        const report = subset ? undefined : await import("../experiments/faults/report.js");
        const outcome = await runFaults({
          source: mmluDir ? { kind: "mmlu", dir: mmluDir } : { kind: "synthetic", scale },
          seed,
          requests,
          openRate,
          ...(classes ? { classes } : {}),
          ...(loops ? { loops } : {}),
          ...(node ? { node } : {}),
          onPhase: (phase) => process.stderr.write(`prefixmesh: ${phase}…\n`),
        });
        if (report === undefined) {
          const { faultsSubsetText, writeFaultsSubset } = await import("../experiments/faults/subset.js");
          const path = await writeFaultsSubset(outcome, command, outDir);
          process.stdout.write(`${faultsSubsetText(outcome, command)}\nwrote ${path}\n`);
          return;
        }
        const path = await report.writeFaultsReport(
          outcome,
          { command, loadBefore, loadAfter: loadavg()[0] ?? 0, cores: availableParallelism() },
          outDir,
        );
        process.stdout.write(
          `wrote ${path} (${outcome.runs.length} runs, ${(outcome.wallMs / 1000).toFixed(1)} s${
            outcome.synthetic ? ", SYNTHETIC workload" : ""
          })\n`,
        );
      } catch (err) {
        const msg = (err as Error)?.message ?? String(err);
        if (
          (err as Error)?.name === "MmluError" ||
          (err as Error)?.name === "CsvError" ||
          err instanceof RangeError
        )
          throw new CliError(msg);
        throw err;
      }
    });
}
