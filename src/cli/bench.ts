/**
 * `prefixmesh bench`: replays a workload through running nodes' HTTP API and prints latency, cached
 * share, hotspot share and per-node counts; `--compare-policies` reruns it under `local`, `affinity`
 * (the paper's) and `cost-aware` (the default) on the same cluster, switched through each node's
 * loopback-only admin endpoint, and prints each routed policy's ratio to `local`.
 */
import { writeFileSync } from "node:fs";
import type { Command } from "commander";
import type { ReplaySummary } from "../server/bench/replay.js";
import { DEFAULT_POLICY } from "./default-policy.js";
import { CliError, parseNumber } from "./errors.js";
import { DEFAULT_MMLU_DIR, loadWorkload, parseWorkloadName, WORKLOADS } from "./workload-flags.js";

interface BenchFlags {
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

/**
 * The baseline first, then the paper's policy, then the default: the cluster is left on the default.
 * Every name must be one the nodes accept (POLICY_NAMES).
 */
const COMPARED = ["local", "affinity", DEFAULT_POLICY] as const;

export function registerBench(program: Command): void {
  program
    .command("bench")
    .description("Replay a workload through running nodes' OpenAI API and report latency and cache hits")
    .requiredOption("--url <urls>", "node API URL(s), comma-separated: http://127.0.0.1:8080,…")
    .option("--workload <name>", `one of ${WORKLOADS.join(", ")}`, "synthetic")
    .option("--mmlu-dir <dir>", "MMLU data folder (dev/ and test/)", DEFAULT_MMLU_DIR)
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
      const urls = f.url
        .split(",")
        .map((u) => u.trim())
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
      const workloadName = parseWorkloadName(f.workload);
      if (f.entry !== "round-robin") throw new CliError("--entry: only round-robin is supported");
      const requests = parseNumber("--requests", f.requests, { min: 1, max: 1_000_000, integer: true });
      const concurrency = parseNumber("--concurrency", f.concurrency, { min: 1, max: 1024, integer: true });
      const seed = parseNumber("--seed", f.seed, { min: 0, max: 2 ** 31, integer: true });
      const workload = await loadWorkload(workloadName, {
        requests,
        seed,
        dir: f.mmluDir ?? "",
        nodes: urls.length,
        text: true,
      });
      const model = await modelOf(urls[0] as string);
      const { replay, summarize } = await import("../server/bench/replay.js");
      const say = (s: string) => process.stderr.write(`${s}\n`);
      say(
        `${workload.name}${workload.synthetic ? " (synthetic)" : ""}: ${workload.requests.length} requests, ` +
          `${concurrency} concurrent, ${urls.length} entry node(s), model ${model}`,
      );

      const runOnce = async (label: string) => {
        const bar = await progressBar(label, workload.requests.length);
        const t0 = performance.now();
        const samples = await replay(workload, model, {
          urls,
          concurrency,
          onProgress: (d) => bar?.update(d),
        });
        bar?.stop();
        return { samples, summary: summarize(samples, (performance.now() - t0) / 1000) };
      };

      const results: Record<string, ReturnType<typeof summarize>> = {};
      let fairCompare = true;
      if (f.comparePolicies) {
        for (const policy of COMPARED) {
          await admin(urls, "policy", { policy });
          // Each run starts from empty caches, or it would inherit the previous run's.
          const reset = await admin(urls, "reset-cache", {}).then(
            () => true,
            (err: Error) => {
              say(`warning: caches not reset (${err.message}); the ${policy} run starts warm`);
              return false;
            },
          );
          if (!reset) fairCompare = false;
          const { summary } = await runOnce(policy);
          results[policy] = summary;
          print(`policy ${policy}`, summary);
        }
        process.stdout.write(
          formatRatios(
            results,
            fairCompare ? "every run starts from empty caches" : "caches were NOT reset between runs",
          ),
        );
      } else {
        const { summary } = await runOnce("bench");
        results.run = summary;
        print("result", summary);
      }
      if (f.json)
        writeFileSync(
          f.json,
          `${JSON.stringify({ workload: workload.name, urls, concurrency, results }, null, 2)}\n`,
        );
      const failed = Object.values(results).reduce((a, r) => a + r.failed, 0);
      if (failed > 0) process.exitCode = 1;
    });
}

async function modelOf(url: string): Promise<string> {
  const { modelOf: listed } = await import("../server/bench/replay.js");
  try {
    return await listed(url);
  } catch (err) {
    throw new CliError(`cannot reach ${url}/v1/models: ${(err as Error).message}`, 1);
  }
}

/** Admin calls (loopback-only on the node): switch policy, reset caches. */
async function admin(urls: string[], what: "policy" | "reset-cache", body: object): Promise<void> {
  for (const u of urls) {
    const r = await fetch(`${u}/admin/${what}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    }).catch((err: Error) => {
      throw new CliError(`admin ${what} failed at ${u}: ${err.message}`, 1);
    });
    if (!r.ok) throw new CliError(`admin ${what} failed at ${u}: ${r.status} ${await r.text()}`, 1);
  }
  // Let a round of anti-entropy carry the new epochs/policies before measuring.
  if (what === "reset-cache") await new Promise((r) => setTimeout(r, 1500));
}

async function progressBar(label: string, total: number) {
  if (!process.stderr.isTTY) return undefined;
  const { SingleBar, Presets } = await import("cli-progress");
  const bar = new SingleBar(
    { format: `${label} [{bar}] {value}/{total} {eta}s`, stream: process.stderr, hideCursor: true },
    Presets.shades_classic,
  );
  bar.start(total, 0);
  return bar;
}

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
const ms = (x: number) => `${x.toFixed(1)} ms`;

/**
 * One line per routed policy: its mean, p50 and p99 latency over local's, with the cached and hotspot
 * shares beside local's (the two things routing trades), then how the caches started.
 */
export function formatRatios(results: Record<string, ReplaySummary>, caches: string): string {
  const l = results.local;
  if (!l) return "";
  const ratio = (a: number, b: number) => (b > 0 ? (a / b).toFixed(3) : "n/a");
  const width = Math.max(...COMPARED.map((p) => p.length));
  const lines = COMPARED.filter((p) => p !== "local" && results[p]).map((p) => {
    const r = results[p] as ReplaySummary;
    return (
      `${`${p} / local`.padEnd(width + 8)} mean ${ratio(r.meanMs, l.meanMs)}  p50 ${ratio(r.p50Ms, l.p50Ms)}  ` +
      `p99 ${ratio(r.p99Ms, l.p99Ms)}  cached share ${pct(r.cachedShare)} vs ${pct(l.cachedShare)}  ` +
      `hotspot ${pct(r.hotspotShare)} vs ${pct(l.hotspotShare)}`
    );
  });
  return `${["latency ratios to local (< 1: routing wins):", ...lines.map((x) => `  ${x}`), `  (${caches})`].join("\n")}\n`;
}

/** The lines `bench` prints for one run. */
export function summaryLines(title: string, s: ReplaySummary): string[] {
  const nodes = Object.entries(s.perNode)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([n, c]) => `${n}:${c}`)
    .join(" ");
  const lines = [
    `${title}: ${s.ok}/${s.requests} ok in ${s.wallSec.toFixed(1)} s`,
    `  latency mean ${ms(s.meanMs)}  p50 ${ms(s.p50Ms)}  p99 ${ms(s.p99Ms)}`,
    `  cached-token share ${pct(s.cachedShare)}  hotspot share ${pct(s.hotspotShare)}  forwarded ${pct(s.forwardedShare)}`,
    `  per node ${nodes || "-"}`,
  ];
  const t = s.meanTimingMs;
  if (t) {
    lines.push(
      `  where the time went (mean, as the entry nodes report it): queue ${ms(t.queue)}  prefill ${ms(t.prefill)}  ` +
        `decode ${ms(t.decode)}  network ${ms(t.network)}; failed attempts ${s.fallbacks}`,
    );
  }
  if (s.tooLong > 0) {
    lines.push(
      `  ${s.tooLong} requests did not fit the model's context (prompt + max_tokens; 400 context_length_exceeded) ` +
        "and are left out; give the engine a longer context to include them (llamacpp: --slot-context)",
    );
  }
  for (const [e, c] of Object.entries(s.errors).slice(0, 5)) lines.push(`  error ×${c}: ${e}`);
  return lines;
}

function print(title: string, s: ReplaySummary): void {
  process.stdout.write(`${summaryLines(title, s).join("\n")}\n`);
}
