/**
 * What `prefixmesh bench` does once its flags are checked: replay a workload through running nodes'
 * HTTP API and print the summary; with `comparePolicies`, rerun it under `local`, `affinity` (the
 * paper's) and the default policy on the same cluster — switched, and caches reset, through each
 * node's loopback-only admin endpoint — and print each routed policy's ratio to `local`.
 */
import type { Workload } from "../workload/types.js";
import { COMPARED } from "./compared.js";
import { type ReplaySummary, replay, summarize } from "./replay.js";

export interface BenchRunOptions {
  urls: string[];
  model: string;
  concurrency: number;
  comparePolicies: boolean;
  say(line: string): void;
  print(text: string): void;
}

/** An admin call a node refused, or that could not reach it. */
export class AdminError extends Error {}

/** Runs the bench; returns every run's summary by label ("run", or the policy names). */
export async function runBench(
  workload: Workload,
  o: BenchRunOptions,
): Promise<Record<string, ReplaySummary>> {
  const runOnce = async (label: string) => {
    const bar = await progressBar(label, workload.requests.length);
    const t0 = performance.now();
    const samples = await replay(workload, o.model, {
      urls: o.urls,
      concurrency: o.concurrency,
      onProgress: (d) => bar?.update(d),
    });
    bar?.stop();
    return summarize(samples, (performance.now() - t0) / 1000);
  };
  const results: Record<string, ReplaySummary> = {};
  if (o.comparePolicies) {
    let fairCompare = true;
    for (const policy of COMPARED) {
      await admin(o.urls, "policy", { policy });
      // Each run starts from empty caches, or it would inherit the previous run's.
      const reset = await admin(o.urls, "reset-cache", {}).then(
        () => true,
        (err: Error) => {
          o.say(`warning: caches not reset (${err.message}); the ${policy} run starts warm`);
          return false;
        },
      );
      if (!reset) fairCompare = false;
      results[policy] = await runOnce(policy);
      o.print(`${summaryLines(`policy ${policy}`, results[policy]).join("\n")}\n`);
    }
    o.print(
      formatRatios(
        results,
        fairCompare ? "every run starts from empty caches" : "caches were NOT reset between runs",
      ),
    );
  } else {
    results.run = await runOnce("bench");
    o.print(`${summaryLines("result", results.run).join("\n")}\n`);
  }
  return results;
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
      throw new AdminError(`admin ${what} failed at ${u}: ${err.message}`);
    });
    if (!r.ok) throw new AdminError(`admin ${what} failed at ${u}: ${r.status} ${await r.text()}`);
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
