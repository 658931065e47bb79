/** `prefixmesh bench`: checks its flags and runs src/bench/replay-run.ts (what it does is said there). */
import { writeFileSync } from "node:fs";
import type { Command } from "commander";
import { COMPARED } from "../bench/compared.js";
import { CliError, parseNumber } from "./errors.js";
import { checkOutFile } from "./out-file.js";
import {
  addWorkloadOptions,
  DEFAULT_MMLU_DIR,
  loadWorkload,
  parseWorkloadChoice,
  WORKLOADS,
  type WorkloadFlagValues,
} from "./workload-flags.js";

interface BenchFlags extends WorkloadFlagValues {
  url: string;
  workload: string;
  mmluDir?: string;
  requests: string;
  concurrency: string;
  entry: string;
  seed: string;
  comparePolicies?: boolean;
  json?: string;
}

export function registerBench(program: Command): void {
  const cmd = program
    .command("bench")
    .description("Replay a workload through running nodes' OpenAI API and report latency and cache hits")
    .requiredOption("--url <urls>", "node API URL(s), comma-separated: http://127.0.0.1:8080,…")
    .option("--workload <name>", `one of ${WORKLOADS.join(", ")}`, "synthetic")
    .option(
      "--mmlu-dir <dir>",
      `MMLU data folder (dev/ and test/) for the mmlu* workloads (default ${DEFAULT_MMLU_DIR})`,
    );
  addWorkloadOptions(cmd, { openLoop: false })
    .option("--requests <n>", "requests to send", "200")
    .option("--concurrency <c>", "concurrent clients (1 = the paper's closed loop)", "1")
    .option("--entry <mode>", "entry node choice: round-robin", "round-robin")
    .option("--seed <s>", "schedule seed", "1")
    .option(
      "--compare-policies",
      `run under ${COMPARED.join(", ")} (caches reset before each) and print each one's ratio to local`,
    )
    .option("--json <file>", "also write the results as JSON")
    .action(async (f: BenchFlags) => {
      // A node's base URL; the `…/v1` form the cluster command prints (OpenAI clients' base) is taken too.
      const urls = f.url
        .split(",")
        .map((u) => u.trim().replace(/\/+$/, "").replace(/\/v1$/, ""))
        .filter(Boolean);
      if (urls.length === 0) throw new CliError("--url needs at least one URL");
      for (const u of urls) {
        try {
          const p = new URL(u);
          if (p.protocol !== "http:" && p.protocol !== "https:") throw new Error();
        } catch {
          throw new CliError(`--url: '${u}' is not an http(s) URL`);
        }
      }
      const workloadChoice = parseWorkloadChoice(f.workload, f);
      if (f.entry !== "round-robin") throw new CliError("--entry: only round-robin is supported");
      const requests = parseNumber("--requests", f.requests, { min: 1, max: 1_000_000, integer: true });
      const concurrency = parseNumber("--concurrency", f.concurrency, { min: 1, max: 1024, integer: true });
      const seed = parseNumber("--seed", f.seed, { min: 0, max: 2 ** 31, integer: true });
      if (f.json !== undefined) checkOutFile("--json", f.json);
      const workload = await loadWorkload(workloadChoice, {
        requests,
        seed,
        dir: f.mmluDir ?? DEFAULT_MMLU_DIR,
        nodes: urls.length,
        text: true,
      });
      // Every entry node answers before the run: a dead or mistyped URL would fail a share of the
      // requests and skew the figures, found only in the summary.
      const model = (await Promise.all(urls.map(modelOf)))[0] as string;
      process.stderr.write(
        `${workload.name}${workload.synthetic ? " (synthetic)" : ""}: ${workload.requests.length} requests, ` +
          `${concurrency} concurrent, ${urls.length} entry node(s), model ${model}\n`,
      );
      // Said before the run, not after it: a workload the model's context cannot hold is the user's to fix.
      const { checkContextFit, fitWarning } = await import("../bench/context-fit.js");
      const warning = fitWarning(
        await checkContextFit(urls[0] as string, model, workload),
        model,
        workload.requests.length,
      );
      if (warning) process.stderr.write(`${warning}\n`);
      const { runBench, AdminError } = await import("../bench/replay-run.js");
      const results = await runBench(workload, {
        urls,
        model,
        concurrency,
        comparePolicies: f.comparePolicies === true,
        say: (line) => process.stderr.write(`${line}\n`),
        print: (text) => process.stdout.write(text),
      }).catch((err: Error) => {
        throw err instanceof AdminError ? new CliError(err.message, 1) : err;
      });
      if (f.json !== undefined) {
        const doc = { workload: workload.name, urls, concurrency, results };
        try {
          writeFileSync(f.json, `${JSON.stringify(doc, null, 2)}\n`);
        } catch (err) {
          throw new CliError(`cannot write --json file '${f.json}': ${(err as Error).message}`, 1);
        }
      }
      const failed = Object.values(results).reduce((a, r) => a + r.failed, 0);
      if (failed > 0) process.exitCode = 1;
    });
}

async function modelOf(url: string): Promise<string> {
  const { modelOf: listed } = await import("../bench/replay.js");
  try {
    return await listed(url);
  } catch (err) {
    // fetch says only "fetch failed"; the cause says why (ECONNREFUSED, a TLS or HTTP mismatch).
    const cause = (err as Error & { cause?: Error & { code?: string } }).cause;
    const why =
      cause?.code === "ERR_SSL_WRONG_VERSION_NUMBER"
        ? "it answers without TLS: use http://"
        : (cause ? [cause.code, cause.message].filter(Boolean).join(": ") : (err as Error).message)
            .replace(/\s+/g, " ")
            .trim();
    throw new CliError(
      `cannot reach ${url}/v1/models: ${why} (each --url is a node's client API, its --listen address)`,
      1,
    );
  }
}
