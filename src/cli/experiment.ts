import { availableParallelism, loadavg } from "node:os";
import { join } from "node:path";
import { SingleBar } from "cli-progress";
import type { Command } from "commander";
import { closedGrid, openGrid } from "../experiments/compare/grid.js";
import { parseSeeds } from "../experiments/compare/seeds.js";
import { CliError, parseNumber } from "./errors.js";
import {
  checkMmluDir,
  commandLine,
  makeOutDir,
  parseSeed,
  parseSyntheticScale,
  parseWorkers,
} from "./experiment-args.js";
import { registerExperimentFaults } from "./experiment-faults.js";
import { registerScale } from "./experiment-scale.js";

interface PaperFlags {
  mmluDir?: string;
  out: string;
  seed: string;
  grid: string;
  workers?: string;
  syntheticScale?: string;
}

export function registerExperiment(program: Command): void {
  const exp = program.command("experiment").description("Reproduce the paper's experiments in the simulator");
  exp
    .command("paper")
    .description(
      "Run the paper's §5 grid (Tables 1-3, Figures 2-4) and write report.md, results.json and figures",
    )
    .option(
      "--mmlu-dir <dir>",
      "MMLU CSV folder with dev/ and test/ (default: the synthetic MMLU-shaped workload)",
    )
    .option("--out <dir>", "output folder", "out/paper")
    .option("--seed <n>", "seed for schedules and the simulator", "1")
    .option("--grid <name>", "paper (full grid) or small (a few runs)", "paper")
    .option("--workers <n>", "worker threads (default: min(2, cores); 0: every run in this thread)")
    .option("--synthetic-scale <x>", "synthetic pool size relative to MMLU (without --mmlu-dir; default 1)")
    .action(async (flags: PaperFlags) => {
      const seed = parseSeed(flags.seed);
      if (flags.grid !== "paper" && flags.grid !== "small") {
        throw new CliError(`--grid must be 'paper' or 'small', got '${flags.grid}'`);
      }
      const workers = parseWorkers(flags.workers);
      const scale = parseSyntheticScale(
        flags.syntheticScale,
        flags.mmluDir === undefined ? undefined : "--mmlu-dir",
      );
      const mmluDir = flags.mmluDir === undefined ? undefined : checkMmluDir(flags.mmluDir);
      const outDir = await makeOutDir(flags.out);
      const command = commandLine("paper");
      const tty = process.stderr.isTTY === true;
      const bar = tty
        ? new SingleBar({
            format: "grid [{bar}] {percentage}% | {value}/{total} requests | {eta_formatted} left",
            stream: process.stderr,
            hideCursor: true,
          })
        : undefined;
      let started = false;
      try {
        const { runPaperExperiment } = await import("../experiments/paper.js");
        const res = await runPaperExperiment({
          ...(mmluDir ? { mmluDir } : {}),
          outDir,
          seed,
          grid: flags.grid,
          workers,
          syntheticScale: scale,
          command: command.replace(/\s+/g, " ").trim(),
          onPhase: (phase) => {
            if (!tty) process.stderr.write(`prefixmesh: ${phase}…\n`);
          },
          onProgress: (done, total) => {
            if (!bar) return;
            if (!started) {
              bar.start(total, 0);
              started = true;
            }
            bar.update(done);
          },
        });
        bar?.stop();
        process.stdout.write(
          `wrote ${join(outDir, "report.md")} (${res.runs.length} configurations, ${(res.wallMs / 1000).toFixed(1)} s${
            res.synthetic ? ", SYNTHETIC workload" : ""
          })\n`,
        );
      } catch (err) {
        bar?.stop();
        const msg = (err as Error)?.message ?? String(err);
        // Dataset and input problems are the user's to fix: a clear message and exit 2, not a stack trace.
        if ((err as Error)?.name === "MmluError" || (err as Error)?.name === "CsvError")
          throw new CliError(msg);
        throw err;
      }
    });
  exp
    .command("compare")
    .description(
      "Compare every routing policy with a centralized router (a baseline) and the oracle: closed and open loop, Δcomm, sizes, heterogeneity, memory; writes report.md, results.json and figures",
    )
    .option(
      "--mmlu-dir <dir>",
      "MMLU CSV folder with dev/ and test/ (default: the synthetic MMLU-shaped workload)",
    )
    .option("--out <dir>", "output folder", "out/compare")
    .option("--seed <n>", "seed for schedules and the simulator (default 1)")
    .option(
      "--seeds <list>",
      "run every run once per seed, e.g. 1,2,3 (tables report the mean over seeds; not with --seed)",
    )
    .option("--requests <n>", "closed-loop requests per run", "2000")
    .option("--open-requests <n>", "open-loop requests per run", "2000")
    .option("--workers <n>", "worker threads (default: min(2, cores); 0: every run in this thread)")
    .option("--synthetic-scale <x>", "synthetic pool size relative to MMLU (without --mmlu-dir; default 1)")
    .option(
      "--fresh-peer-load",
      "every node runs with freshPeerLoad: queue depth also on acks and answers, forwards in flight counted",
    )
    .option(
      "--peer-speed",
      "cost-aware (and the oracle) with peerSpeed: peers' engine speed learned from their answers",
    )
    .option(
      "--cells <regex>",
      "only the runs whose id matches, e.g. '^closed-(local|affinity|cost-aware|cost-aware-daemon|oracle)-n4-' (ids: <slice>-<policy>-n<nodes>-c<Δcomm>-<memory>[-het][-l<load%>]); the report covers those runs only",
    )
    .action(async (flags: CompareFlags) => {
      const seeds = compareSeeds(flags);
      const cells = compareCells(flags.cells);
      const closedRequests = parseNumber("--requests", flags.requests, {
        min: 10,
        max: 1_000_000,
        integer: true,
      });
      const openRequests = parseNumber("--open-requests", flags.openRequests, {
        min: 10,
        max: 1_000_000,
        integer: true,
      });
      const workers = parseWorkers(flags.workers);
      const scale = parseSyntheticScale(
        flags.syntheticScale,
        flags.mmluDir === undefined ? undefined : "--mmlu-dir",
      );
      const mmluDir = flags.mmluDir === undefined ? undefined : checkMmluDir(flags.mmluDir);
      const outDir = await makeOutDir(flags.out);
      const command = commandLine("compare");
      const loadBefore = loadavg()[0] ?? 0;
      try {
        const { runCompare } = await import("../experiments/compare/run.js");
        const { writeCompareReport } = await import("../experiments/compare/report.js");
        const outcome = await runCompare({
          source: mmluDir ? { kind: "mmlu", dir: mmluDir } : { kind: "synthetic", scale },
          seeds,
          closedRequests,
          openRequests,
          freshPeerLoad: flags.freshPeerLoad === true,
          peerSpeed: flags.peerSpeed === true,
          workers,
          ...(cells ? { cells } : {}),
          onPhase: (phase) => process.stderr.write(`prefixmesh: ${phase}…\n`),
        });
        await writeCompareReport(
          outcome,
          { command, loadBefore, loadAfter: loadavg()[0] ?? 0, cores: availableParallelism() },
          outDir,
        );
        process.stdout.write(
          `wrote ${join(outDir, "report.md")} (${outcome.runs.length} runs, ${(outcome.wallMs / 1000).toFixed(1)} s${
            outcome.synthetic ? ", SYNTHETIC workload" : ""
          })\n`,
        );
      } catch (err) {
        const msg = (err as Error)?.message ?? String(err);
        if ((err as Error)?.name === "MmluError" || (err as Error)?.name === "CsvError")
          throw new CliError(msg);
        throw err;
      }
    });
  registerExperimentFaults(exp);
  registerScale(exp);
}

/** `--cells`: a regular expression over run ids; one that matches no run is an error. */
function compareCells(text: string | undefined): RegExp | undefined {
  if (text === undefined) return undefined;
  let re: RegExp;
  try {
    re = new RegExp(text);
  } catch (err) {
    throw new CliError(`--cells ${text}: ${(err as Error).message}`);
  }
  if (![...closedGrid(), ...openGrid()].some((r) => re.test(r.id)))
    throw new CliError(`--cells ${text}: matches no run id (e.g. ${closedGrid()[0]?.id})`);
  return re;
}

/** `--seed n` or `--seeds a,b,…` (not both); seed 1 without either. */
function compareSeeds(flags: CompareFlags): number[] {
  if (flags.seed !== undefined && flags.seeds !== undefined)
    throw new CliError("--seed and --seeds: give one of them");
  if (flags.seeds !== undefined) {
    const seeds = parseSeeds(flags.seeds);
    if (typeof seeds === "string") throw new CliError(`--seeds ${flags.seeds}: ${seeds}`);
    return seeds;
  }
  return [parseSeed(flags.seed ?? "1")];
}

interface CompareFlags {
  mmluDir?: string;
  out: string;
  seed?: string;
  seeds?: string;
  requests: string;
  openRequests: string;
  workers?: string;
  syntheticScale?: string;
  freshPeerLoad?: boolean;
  peerSpeed?: boolean;
  cells?: string;
}
