/**
 * The comparison's report: report.md (targets with measured values beside them, met or not; the
 * summary tables; every run in full), results.json and the figures as SVG + PNG.
 */
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { DAEMON_NODE_DEFAULTS } from "../../core/node/config.js";
import { makeDir } from "../../net/make-dir.js";
import { renderVegaLite } from "../render.js";
import type { CompareResult } from "./execute.js";
import { type HitBar, hitVsIdeal, latencyVsComm, type PolicyPoint, p99VsLoad } from "./figures.js";
import {
  COMM_MS,
  COMPARED,
  type CompareRun,
  DAEMON_ROW,
  LOADS,
  ORACLE_POLICY,
  SLOW_FACTOR,
  ZIPF_S,
} from "./grid.js";
import { pct, type Row, s3 } from "./rows.js";
import type { CompareOutcome } from "./run.js";
import { bySeed, meanRows, type SeedRow } from "./seeds.js";
import { targets } from "./targets.js";

export interface ReportContext {
  command: string;
  /** 1-minute load average before and after the run (the machine is shared). */
  loadBefore: number;
  loadAfter: number;
  cores: number;
}

function find(rows: Row[], f: (r: CompareRun) => boolean): Row[] {
  return rows.filter((r) => f(r.run));
}

function one(rows: Row[], f: (r: CompareRun) => boolean): CompareResult | undefined {
  return rows.find((r) => f(r.run))?.result;
}

function matrix(
  rows: Row[],
  cols: { label: string; f: (r: CompareRun) => boolean }[],
  value: (r: CompareResult) => string,
): string[] {
  const out = [
    `| policy | ${cols.map((c) => c.label).join(" | ")} |`,
    `|---|${cols.map(() => "---").join("|")}|`,
  ];
  for (const p of COMPARED) {
    const vals = cols.map((c) => {
      const r = one(rows, (x) => x.policy === p && c.f(x));
      return r ? value(r) : "—";
    });
    out.push(`| ${p} | ${vals.join(" | ")} |`);
  }
  return out;
}

function detail(rows: SeedRow[]): string[] {
  const out = [
    "| run | seed | mean s | p50 s | p99 s | hit actual | hit ideal | hotspot | forwarded | refused | fallbacks | gossip MB | rate/s | wall s |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
  ];
  for (const { run, seed, result: r } of rows) {
    out.push(
      `| ${run.id} | ${seed} | ${s3(r.meanS)} | ${s3(r.p50S)} | ${s3(r.p99S)} | ${pct(r.actualHit)} | ${pct(r.idealHit)} | ${pct(r.hotspotShare)} | ${pct(r.forwardedShare)} | ${r.refused} | ${r.fallbacks} | ${(r.gossipBytes / 1e6).toFixed(2)} | ${r.rate === undefined ? "—" : r.rate.toFixed(2)} | ${(r.wallMs / 1000).toFixed(1)} |`,
    );
  }
  return out;
}

export async function writeCompareReport(
  o: CompareOutcome,
  ctx: ReportContext,
  outDir: string,
): Promise<void> {
  await makeDir(outDir, 0o777, (m) => new Error(m));
  // Every table and figure reads the mean over seeds; target 1 also the seed-by-seed spread.
  const rows = meanRows(o.runs);
  const seedRows = bySeed(o.runs, o.seeds);
  const many = o.seeds.length > 1;
  const constrained = [...new Set(o.constrainedTokens)].join("/");
  const order = [...COMPARED];
  // Figures.
  const commPoints: PolicyPoint[] = [];
  for (const { run, result } of find(rows, (r) => r.slice === "closed"))
    commPoints.push({
      policy: run.policy,
      x: run.commMs,
      y: result.meanS,
      panel: run.memory === "paper" ? "paper memory" : `constrained cache (${constrained} tokens)`,
    });
  const loadPoints: PolicyPoint[] = [];
  for (const { run, result } of find(rows, (r) => r.load !== undefined && !r.hetero))
    loadPoints.push({
      policy: run.policy,
      x: Math.round((run.load ?? 0) * 100),
      y: result.p99S,
      panel: `${run.nodes} nodes`,
    });
  const hitBars: HitBar[] = [];
  for (const { run, result } of find(rows, (r) => r.slice === "closed" && r.commMs === 2))
    hitBars.push({
      policy: run.policy,
      hit: result.actualHit,
      ideal: result.idealHit,
      panel: run.memory === "paper" ? "paper memory" : "constrained cache",
    });
  const figures = [
    { name: "latency-vs-comm", spec: latencyVsComm(commPoints, order) },
    { name: "p99-vs-load", spec: p99VsLoad(loadPoints, order) },
    { name: "hit-vs-ideal", spec: hitVsIdeal(hitBars, order) },
  ];
  for (const f of figures) {
    const r = await renderVegaLite(f.spec);
    await writeFile(join(outDir, `${f.name}.svg`), r.svg);
    await writeFile(join(outDir, `${f.name}.png`), r.png);
  }
  await writeFile(
    join(outDir, "results.json"),
    `${JSON.stringify({ seeds: o.seeds, capacities: o.capacities, constrainedTokens: o.constrainedTokens, spec: o.spec, runs: o.runs }, null, 1)}\n`,
  );

  const closedCols = (memory: string) =>
    COMM_MS.map((c) => ({
      label: `${c} ms`,
      f: (r: CompareRun) => r.slice === "closed" && r.memory === memory && r.commMs === c,
    }));
  const loadCols = (slice: string) =>
    LOADS.map((l) => ({
      label: `${Math.round(l * 100)}%`,
      f: (r: CompareRun) => r.slice === slice && r.load === l,
    }));
  const md: string[] = [
    "# Routing policies compared, against a centralized router (simulator)",
    "",
    `Generated by \`${ctx.command}\` in ${(o.wallMs / 1000).toFixed(0)} s wall on ${ctx.cores} cores (1-minute load average ${ctx.loadBefore.toFixed(1)} before, ${ctx.loadAfter.toFixed(1)} after: the machine is shared, so wall times are inflated by whatever else ran).`,
    o.synthetic ? "\n**SYNTHETIC workload** (no `--mmlu-dir`): MMLU-shaped, not MMLU.\n" : "",
    "## Setup",
    "",
    `- Policies: ${COMPARED.map((p) => `\`${p}\``).join(", ")}, all on the same ${many ? `seeds (${o.seeds.join(", ")}; each run once per seed, and every table below the mean over the seeds unless it says otherwise)` : `seed (${o.seeds[0]})`} and schedules. Each node runs the unchanged core node code in the simulator (profile \`paper-h100-qwen0.5b\`, Δpoll 500 ms).`,
    "- **`centralized` is a baseline, simulation only** (the daemon refuses it): one router with a perfectly fresh global view of every node's tree and queue — the simulator's oracle — applying SGLang model gateway's `cache_aware` rule with sgl-router's CLI defaults: if (max − min load) > 64 and max > 1.5 × min → shortest queue; else the best prefix match if it covers more than 0.3 of the prompt; else the node with the smallest tree. SGLang's tree is per character and approximate (what the router sent where); here it is per token and the owners' true caches (block-granular estimates). Its load is the true queue depth plus the origin's forwards not yet reported, and there is no extra router hop.",
    `- **\`${DAEMON_ROW}\`** is \`cost-aware\` with the daemon's node defaults (\`DAEMON_NODE_DEFAULTS\`, the simulator's \`daemonConfig\`): offload (waiting requests move to a peer that will finish them sooner, each move charged to that peer at once; cost-aware's wait floor bounded to one service time), advertised engine costs (queues and prefills weighed by each side's speed), each node calibrated at boot, answer recovery, peer trust, the daemon's ack timeouts; gossip \`${DAEMON_NODE_DEFAULTS.gossip}\` (the others run the full mesh), Δpoll 500 ms as here. Every other row (cost-aware included) runs the core schema's defaults, i.e. the paper's node, where none of these is on.`,
    `- **\`oracle\`** is the bound: \`${ORACLE_POLICY}\` with perfect estimates (every estimate, queue depth and push-back refreshed the instant it changes, free).`,
    `- Closed loop: MMLU uniform, the first ${o.spec.closedRequests} requests of the seeded schedule, one request in flight (the paper's loop).`,
    `- Open loop: MMLU with Zipf-skewed subjects (s = ${ZIPF_S}, questions repeat), ${o.spec.openRequests} requests, Poisson arrivals. **Capacity** is measured, not assumed: \`local\` runs the same schedule closed loop (one request in flight) on 4 and 16 nodes; its mean latency is the service time S, and capacity = nodes / S (a ${SLOW_FACTOR}× slower node counts as 1/${SLOW_FACTOR} of a node). ${o.capacities.length === 0 ? "Here: no open-loop run in this selection, so capacity was not measured" : o.capacities.map((c) => `${many ? `seed ${c.seed}, ` : ""}${c.nodes} nodes: S = ${s3(c.serviceS)} s, capacity ${c.rate.toFixed(2)} requests/s`).join("; ")}.`,
    `- Memory: the paper's (${o.paperTokens} tokens per node) and a constrained cache (${constrained} tokens per node: a quarter of the MMLU prefix working set, as in the paper experiment).`,
    `- Heterogeneous: node 0's engine is ${SLOW_FACTOR}× slower (every run's prefill and decode take ${SLOW_FACTOR}× as long); the nodes learn it from their own runs only.`,
    "- Slices (a full cross product would be thousands of runs): closed loop 4 nodes × Δcomm 2/20/200/1000 ms × both memories; closed loop 16 nodes and heterogeneous at Δcomm 2/200 ms; open loop 4 nodes at 50/80/95/120%; 16 nodes at 80/120%; heterogeneous at 80%.",
    `- Peer load: ${o.spec.freshPeerLoad ? "**fresh** (`freshPeerLoad`: acks and answers carry the server's queue depth, and an origin adds its forwards in flight to a peer's last reported depth), for every policy" : "snapshot headers only (the paper's, a Δpoll old; `--fresh-peer-load` turns on `freshPeerLoad`)"}.`,
    `- cost-aware's \`peerSpeed\` (a peer's engine speed learned from its answers): ${o.spec.peerSpeed ? "**on** for cost-aware and the oracle (`--peer-speed`)" : "off (its default; `--peer-speed` turns it on)"}.`,
    "- Metrics: latency from the client's submit to its answer; hit rate = cached prompt tokens / prompt tokens, actual (the engine's) and ideal (one cache holding every earlier prompt); hotspot = the busiest node's share of answers; refused = client errors after retries; fallbacks = forwards that fell back to the next candidate; gossip = bytes of snapshots and heartbeats (full mesh), of SWIM and digest messages (scuttlebutt).",
    "",
    "## Targets (issue 17), measured",
    "",
    ...targets(rows, seedRows, o.seeds),
    "## Mean latency (s), closed loop, 4 nodes",
    "",
    "Paper memory:",
    "",
    ...matrix(rows, closedCols("paper"), (r) => s3(r.meanS)),
    "",
    "Constrained cache:",
    "",
    ...matrix(rows, closedCols("constrained"), (r) => s3(r.meanS)),
    "",
    "![latency vs Δcomm](latency-vs-comm.png)",
    "",
    "## Actual hit rate, closed loop, 4 nodes (ideal beside the header)",
    "",
    ...matrix(
      rows,
      [
        ...closedCols("paper").map((c) => ({ ...c, label: `paper ${c.label}` })),
        ...closedCols("constrained").map((c) => ({ ...c, label: `constr. ${c.label}` })),
      ],
      (r) => pct(r.actualHit),
    ),
    "",
    `Ideal hit rate of the closed-loop schedule: ${pct(rows.find((r) => r.run.slice === "closed")?.result.idealHit ?? 0)}.`,
    "",
    "![hit rate vs ideal](hit-vs-ideal.png)",
    "",
    "## p99 latency (s), open loop",
    "",
    "4 nodes:",
    "",
    ...matrix(rows, loadCols("open"), (r) => s3(r.p99S)),
    "",
    "4 nodes, mean latency (s):",
    "",
    ...matrix(rows, loadCols("open"), (r) => s3(r.meanS)),
    "",
    "![p99 vs load](p99-vs-load.png)",
    "",
    "## Every run",
    "",
    ...detail(o.runs),
    "",
  ];
  await writeFile(join(outDir, "report.md"), md.filter((l) => l !== undefined).join("\n"));
}
