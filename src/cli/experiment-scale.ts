/** `prefixmesh experiment scale`: both gossip modes from 4 to 1,024 nodes, written as a report. */

import { availableParallelism, loadavg } from "node:os";
import { join } from "node:path";
import type { Command } from "commander";
import { BOUNDED_ESTIMATES, SCALE_NODES, SERIES, type SeriesKey } from "../experiments/scale/grid.js";
import { CliError, parseNumber } from "./errors.js";
import { checkMmluDir, commandLine, makeOutDir, parseSeed, parseSyntheticScale } from "./experiment-args.js";

interface ScaleFlags {
  mmluDir?: string;
  out: string;
  seed: string;
  maxNodes?: string;
  nodes?: string;
  series?: string;
  quick?: boolean;
  arrivalS?: string;
  minRequests?: string;
  budgetS?: string;
  maxEstimates?: string;
  heapBudgetMb: string;
  syntheticScale?: string;
}

export function registerScale(exp: Command): void {
  exp
    .command("scale")
    .description(
      "Gossip at scale: full mesh vs SWIM + Scuttlebutt for N = 4 … 1,024 (traffic, CPU, memory, spread, detection, false suspicions, hit rate, latency); writes report.md, results.json and figures",
    )
    .option(
      "--mmlu-dir <dir>",
      "MMLU CSV folder with dev/ and test/ (default: the synthetic MMLU-shaped workload)",
    )
    // Not docs/results: a --quick or subset run must not overwrite the committed report (pass --out).
    .option("--out <dir>", "output folder", "out/scale")
    .option("--seed <n>", "seed for schedules and the simulator", "1")
    .option("--max-nodes <n>", "largest N of 4, 16, 64, 256, 1024 (default 1024; 16 with --quick)")
    .option(
      "--nodes <list>",
      `only these N, comma-separated, of ${SCALE_NODES.join(", ")} (e.g. 1024: one N; runs at N not measured are not projected)`,
    )
    .option(
      "--series <list>",
      `only these runs, comma-separated, of ${SERIES.join(", ")} (e.g. --nodes 1024 --series oracle: one cell)`,
    )
    .option("--quick", "a small, fast run (tests): N ≤ 16 unless --max-nodes, 3 s of arrivals")
    .option(
      "--arrival-s <s>",
      "seconds of open-loop arrivals per node-simulator run (default 10; 3 with --quick)",
    )
    .option(
      "--min-requests <n>",
      "requests per node-simulator run at least: small N get a longer arrival window (default 1000; 0 with --quick)",
    )
    .option(
      "--budget-s <s>",
      "CPU seconds (user + system) per run, not wall: a run projected past it is reported, not started (default 300)",
    )
    .option("--heap-budget-mb <mb>", "heap per run, MB, projected the same way", "3000")
    .option(
      "--max-estimates <m>",
      `estimates each node keeps in the bounded series (default ${BOUNDED_ESTIMATES}, the issue's)`,
    )
    .option("--synthetic-scale <x>", "synthetic pool size relative to MMLU (without --mmlu-dir; default 1)")
    .action(async (flags: ScaleFlags) => {
      const quick = flags.quick === true;
      const seed = parseSeed(flags.seed);
      // A flag's value, else its --quick or full default.
      const orDefault = (
        v: string | undefined,
        quickDefault: number,
        fullDefault: number,
        parse: (v: string) => number,
      ) => (v === undefined ? (quick ? quickDefault : fullDefault) : parse(v));
      // --nodes names every N to run, so a bound beside it would be silently unused.
      if (flags.nodes !== undefined && flags.maxNodes !== undefined)
        throw new CliError("--max-nodes and --nodes: give one of them (--nodes lists every N to run)");
      const maxNodes = orDefault(flags.maxNodes, 16, 1024, (v) =>
        parseNumber("--max-nodes", v, { min: 4, max: 1024, integer: true }),
      );
      const arrivalS = orDefault(flags.arrivalS, 3, 10, (v) =>
        parseNumber("--arrival-s", v, { min: 1, max: 600 }),
      );
      const minRequests = orDefault(flags.minRequests, 0, 1000, (v) =>
        parseNumber("--min-requests", v, { min: 0, max: 100_000, integer: true }),
      );
      const budgetS =
        flags.budgetS === undefined ? 300 : parseNumber("--budget-s", flags.budgetS, { min: 1, max: 86_400 });
      const boundedEstimates =
        flags.maxEstimates === undefined
          ? undefined
          : parseNumber("--max-estimates", flags.maxEstimates, { min: 1, max: 4095, integer: true });
      const heapBudgetMb = parseNumber("--heap-budget-mb", flags.heapBudgetMb, { min: 16, max: 1_000_000 });
      const scale = parseSyntheticScale(
        flags.syntheticScale,
        flags.mmluDir === undefined ? undefined : "--mmlu-dir",
      );
      const nodes =
        flags.nodes === undefined
          ? undefined
          : listOf("--nodes", flags.nodes, SCALE_NODES.map(String)).map(Number);
      const series =
        flags.series === undefined ? undefined : (listOf("--series", flags.series, SERIES) as SeriesKey[]);
      const mmluDir = flags.mmluDir === undefined ? undefined : checkMmluDir(flags.mmluDir);
      const outDir = await makeOutDir(flags.out);
      const command = commandLine("scale");
      const loadBefore = loadavg()[0] ?? 0;
      try {
        const { runScale } = await import("../experiments/scale/run.js");
        const { writeScaleReport } = await import("../experiments/scale/report.js");
        const o = await runScale({
          source: mmluDir ? { kind: "mmlu", dir: mmluDir } : { kind: "synthetic", scale },
          seed,
          maxNodes: nodes === undefined ? maxNodes : Math.max(...nodes),
          ...(nodes === undefined ? {} : { nodes }),
          ...(series === undefined ? {} : { series }),
          arrivalS,
          minRequests,
          budgetS,
          heapBudgetMb,
          ...(boundedEstimates === undefined ? {} : { boundedEstimates }),
          onPhase: (p) => process.stderr.write(`prefixmesh: ${p}…\n`),
        });
        await writeScaleReport(
          o,
          { command, loadBefore, loadAfter: loadavg()[0] ?? 0, cores: availableParallelism() },
          outDir,
        );
        process.stdout.write(
          `wrote ${join(outDir, "report.md")} (${o.cells.length} simulator runs, ${o.skipped.length} not started, ${(o.wallMs / 1000).toFixed(1)} s wall, ${(o.cpuMs / 1000).toFixed(1)} s CPU${o.synthetic ? ", SYNTHETIC workload" : ""})\n`,
        );
      } catch (err) {
        const msg = (err as Error)?.message ?? String(err);
        if ((err as Error)?.name === "MmluError" || (err as Error)?.name === "CsvError")
          throw new CliError(msg);
        throw err;
      }
    });
}

/** A comma-separated list whose every item is one of `allowed`. */
function listOf(flag: string, v: string, allowed: readonly string[]): string[] {
  const items = v
    .split(",")
    .map((x) => x.trim())
    .filter((x) => x !== "");
  const bad = items.filter((x) => !allowed.includes(x));
  if (items.length === 0 || bad.length > 0)
    throw new CliError(`${flag}: expected a comma-separated list of ${allowed.join(", ")}, got "${v}"`);
  return items;
}
