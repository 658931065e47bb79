/**
 * The comparison's report: report.md (targets with measured values beside them, met or not; the
 * summary tables; every run in full), results.json and the figures as SVG + PNG.
 */
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { DAEMON_NODE_DEFAULTS } from "../../core/node/config.js";
import { renderVegaLite } from "../render.js";
import { conflictSection } from "./conflict.js";
import type { CompareResult } from "./execute.js";
import { type HitBar, hitVsIdeal, latencyVsComm, type PolicyPoint, p99VsLoad } from "./figures.js";
import {
  ADMISSION_WAIT_MS,
  COMM_MS,
  COMPARED,
  type CompareRun,
  DAEMON_ROW,
  LOADS,
  ORACLE_POLICY,
  OVERLOAD,
  SLOW_FACTOR,
  ZIPF_S,
} from "./grid.js";
import { pct, type Row, resultOf, s3 } from "./rows.js";
import type { CompareOutcome } from "./run.js";
import { bySeed, meanRows, type SeedRow } from "./seeds.js";

export interface ReportContext {
  command: string;
  /** 1-minute load average before and after the run (the machine is shared). */
  loadBefore: number;
  loadAfter: number;
  cores: number;
}

const mark = (ok: boolean) => (ok ? "met" : "**not met**");

function find(rows: Row[], f: (r: CompareRun) => boolean): Row[] {
  return rows.filter((r) => f(r.run));
}

function one(rows: Row[], f: (r: CompareRun) => boolean): CompareResult | undefined {
  return rows.find((r) => f(r.run))?.result;
}

/** A run's cell: its id without the policy. */
const cellKey = (r: CompareRun) => r.id.replace(`-${r.policy}-`, "-*-");

/** Cells: runs grouped by everything but the policy. */
function cells(rows: Row[]): Row[][] {
  const by = new Map<string, Row[]>();
  for (const r of rows) {
    const k = cellKey(r.run);
    const list = by.get(k);
    if (list) list.push(r);
    else by.set(k, [r]);
  }
  return [...by.values()];
}

function cellLabel(r: CompareRun): string {
  const parts = [
    `${r.nodes} nodes`,
    `Δcomm ${r.commMs} ms`,
    r.memory === "paper" ? "paper memory" : "constrained cache",
  ];
  if (r.hetero) parts.push(`node 0 ${SLOW_FACTOR}× slower`);
  parts.push(r.load === undefined ? "closed loop" : `open loop ${Math.round(r.load * 100)}%`);
  return parts.join(", ");
}

/** Target 1's ratios of one cell's runs: cost-aware and the daemon row ÷ best of local/affinity, ÷ oracle. */
function t1Ratios(cell: readonly Row[]): number[] | undefined {
  const g = (p: string) => resultOf(cell, p);
  const [ca, lo, af, or, da] = [g("cost-aware"), g("local"), g("affinity"), g("oracle"), g(DAEMON_ROW)];
  if (!ca || !lo || !af || !or || !da) return undefined;
  const best = Math.min(lo.meanS, af.meanS);
  return [ca.meanS / best, ca.meanS / or.meanS, da.meanS / best, da.meanS / or.meanS];
}

/** Each of target 1's ratios over the seeds ("min–max"), and how many seeds meet the bound alone. */
function t1Spread(cell: readonly Row[], seedRows: readonly Row[][]): { range: string[]; met: number[] } {
  const k = cellKey(cell[0]!.run);
  const per = seedRows.flatMap((rows) => {
    const r = t1Ratios(rows.filter((x) => cellKey(x.run) === k));
    return r ? [r] : [];
  });
  const range = [0, 1, 2, 3].map((i) => {
    const xs = per.map((r) => r[i] as number);
    return `${Math.min(...xs).toFixed(3)}–${Math.max(...xs).toFixed(3)}`;
  });
  const met = [0, 2].map(
    (i) => per.filter((r) => (r[i] as number) <= 1.02 && (r[i + 1] as number) <= 1.02).length,
  );
  return { range, met };
}

function targets(rows: Row[], seedRows: Row[][], seedIds: readonly number[]): string[] {
  const out: string[] = [];
  const closedCells = cells(rows.filter((r) => r.run.load === undefined));
  const many = seedRows.length > 1;
  out.push(
    "### Target 1: `cost-aware` mean ≤ 1.02 × min(local, affinity) and ≤ 1.02 × the oracle's, every closed-loop cell",
    "",
    `Checked for \`cost-aware\` (the paper's node) and for \`${DAEMON_ROW}\` (the same policy as the daemon configures it).`,
    many
      ? `Over ${seedRows.length} seeds: every latency is the mean over the seeds of that run's mean latency; each ratio is the ratio of those means, with the smallest and largest of the same ratio taken seed by seed beside it (min–max). **Verdict: met when both ratios of the means are ≤ 1.02**; "k/${seedRows.length}" says how many seeds meet the bound on their own.`
      : "",
    "",
  );
  out.push(
    `| cell | cost-aware | local | affinity | oracle | ÷ best of local/affinity | ÷ oracle | verdict | ${DAEMON_ROW} | ÷ best | ÷ oracle | verdict |`,
  );
  out.push("|---|---|---|---|---|---|---|---|---|---|---|---|");
  let all1 = true;
  let all1d = true;
  for (const cell of closedCells) {
    const g = (p: string) => resultOf(cell, p);
    const ca = g("cost-aware");
    const lo = g("local");
    const af = g("affinity");
    const or = g("oracle");
    const da = g(DAEMON_ROW);
    if (!ca || !lo || !af || !or || !da) continue;
    const best = Math.min(lo.meanS, af.meanS);
    const ok = ca.meanS <= 1.02 * best && ca.meanS <= 1.02 * or.meanS;
    const okd = da.meanS <= 1.02 * best && da.meanS <= 1.02 * or.meanS;
    all1 &&= ok;
    all1d &&= okd;
    const sp = many ? t1Spread(cell, seedRows) : undefined;
    const ratio = (x: number, i: number) => `${x.toFixed(3)}${sp ? ` (${sp.range[i]})` : ""}`;
    const seedsMet = (i: number) => (sp ? `, ${sp.met[i]}/${seedRows.length}` : "");
    out.push(
      `| ${cellLabel(cell[0]!.run)} | ${s3(ca.meanS)} | ${s3(lo.meanS)} | ${s3(af.meanS)} | ${s3(or.meanS)} | ${ratio(ca.meanS / best, 0)} | ${ratio(ca.meanS / or.meanS, 1)} | ${mark(ok)}${seedsMet(0)} | ${s3(da.meanS)} | ${ratio(da.meanS / best, 2)} | ${ratio(da.meanS / or.meanS, 3)} | ${mark(okd)}${seedsMet(1)} |`,
    );
  }
  out.push("", `Overall: cost-aware ${mark(all1)}; ${DAEMON_ROW} ${mark(all1d)}.`, "");

  out.push(
    "### Target 2: `cost-aware` actual hit rate ≥ 0.95 × `centralized`'s in every cell; hotspot ≤ 40%",
    "",
  );
  out.push(
    `| cell | cost-aware hit | centralized hit | ratio | cost-aware hotspot | verdict | ${DAEMON_ROW} hit | ratio | hotspot | verdict |`,
  );
  out.push("|---|---|---|---|---|---|---|---|---|---|");
  let all2 = true;
  let all2d = true;
  for (const cell of cells(rows)) {
    const ca = cell.find((r) => r.run.policy === "cost-aware")?.result;
    const ce = cell.find((r) => r.run.policy === "centralized")?.result;
    const da = cell.find((r) => r.run.policy === DAEMON_ROW)?.result;
    if (!ca || !ce || !da) continue;
    const ratioOf = (x: CompareResult) => (ce.actualHit === 0 ? 1 : x.actualHit / ce.actualHit);
    const ok = ratioOf(ca) >= 0.95 && ca.hotspotShare <= 0.4;
    const okd = ratioOf(da) >= 0.95 && da.hotspotShare <= 0.4;
    all2 &&= ok;
    all2d &&= okd;
    out.push(
      `| ${cellLabel(cell[0]!.run)} | ${pct(ca.actualHit)} | ${pct(ce.actualHit)} | ${ratioOf(ca).toFixed(3)} | ${pct(ca.hotspotShare)} | ${mark(ok)} | ${pct(da.actualHit)} | ${ratioOf(da).toFixed(3)} | ${pct(da.hotspotShare)} | ${mark(okd)} |`,
    );
  }
  out.push("", `Overall: cost-aware ${mark(all2)}; ${DAEMON_ROW} ${mark(all2d)}.`, "");
  out.push(...conflictSection(closedCells, cellLabel));

  out.push(
    "### Target 3: open loop at 80%: `cost-aware` p99 ≤ 0.5 × local's and ≤ centralized's; at 120% refusals reported and no admitted request waits past the bound",
    "",
  );
  out.push(
    `| cell | cost-aware p99 | local p99 | centralized p99 | ÷ local | ÷ centralized | verdict | ${DAEMON_ROW} p99 | ÷ local | ÷ centralized | verdict |`,
  );
  out.push("|---|---|---|---|---|---|---|---|---|---|---|");
  let all3 = true;
  let all3d = true;
  for (const cell of cells(rows.filter((r) => r.run.load === 0.8))) {
    const g = (p: string) => resultOf(cell, p);
    const ca = g("cost-aware");
    const lo = g("local");
    const ce = g("centralized");
    const da = g(DAEMON_ROW);
    if (!ca || !lo || !ce || !da) continue;
    const ok = ca.p99S <= 0.5 * lo.p99S && ca.p99S <= ce.p99S;
    const okd = da.p99S <= 0.5 * lo.p99S && da.p99S <= ce.p99S;
    all3 &&= ok;
    all3d &&= okd;
    out.push(
      `| ${cellLabel(cell[0]!.run)} | ${s3(ca.p99S)} | ${s3(lo.p99S)} | ${s3(ce.p99S)} | ${(ca.p99S / lo.p99S).toFixed(3)} | ${(ca.p99S / ce.p99S).toFixed(3)} | ${mark(ok)} | ${s3(da.p99S)} | ${(da.p99S / lo.p99S).toFixed(3)} | ${(da.p99S / ce.p99S).toFixed(3)} | ${mark(okd)} |`,
    );
  }
  out.push("", `Overall: cost-aware ${mark(all3)}; ${DAEMON_ROW} ${mark(all3d)}.`, "");
  // How far routing alone can go: the oracle routes with perfect estimates but moves nothing queued.
  const bound = cells(rows.filter((r) => r.run.load === 0.8)).flatMap((cell) => {
    const or = cell.find((r) => r.run.policy === "oracle")?.result;
    const lo = cell.find((r) => r.run.policy === "local")?.result;
    return or && lo ? [`${cellLabel(cell[0]!.run)}: ${(or.p99S / lo.p99S).toFixed(3)}`] : [];
  });
  out.push(
    `The oracle's p99 ÷ local's at 80% (routing with perfect estimates, nothing queued ever moved): ${bound.join("; ")}.`,
    "",
  );
  out.push(
    "At 120% of capacity, refused requests (an error to the client after its retries) per policy:",
    "",
  );
  out.push(`| cell | ${COMPARED.join(" | ")} |`, `|---|${COMPARED.map(() => "---").join("|")}|`);
  for (const cell of cells(rows.filter((r) => r.run.load === OVERLOAD))) {
    const vals = COMPARED.map((p) => {
      const r = cell.find((x) => x.run.policy === p)?.result;
      // A mean over seeds need not be whole.
      const n = Number.isInteger(r?.refused) ? String(r?.refused) : r?.refused.toFixed(1);
      return r ? `${n} (${pct(r.refused / r.requests)})` : "—";
    });
    out.push(`| ${cellLabel(cell[0]!.run)} | ${vals.join(" | ")} |`);
  }
  out.push(
    "",
    `At ${Math.round(OVERLOAD * 100)}% of capacity the ${DAEMON_ROW} row runs with admission by expected wait on`,
    `(\`maxWaitMs\` ${ADMISSION_WAIT_MS} ms; every other row, and that row at lower loads, as the defaults: off,`,
    "requests queue up to each node's `maxQueue`, 1024). A refused client retries after the",
    "Retry-After it was given (up to its try limit): refused once = requests refused at least once;",
    "refused = still refused after every retry. Wait = admission (the entry node taking the try that",
    `was answered) to the start of its engine run (queues, forwards, fallbacks; not the answer's way back), over the requests answered${many ? " (one row per seed: the bound holds for every request of every seed)" : ""}:`,
    "",
    "| cell | refused once | refused | wait p99 s | wait max s | waited past the bound | verdict |",
    "|---|---|---|---|---|---|---|",
  );
  let all3w = true;
  const seedOf = new Map(seedRows.map((rs, i) => [rs, seedIds[i]]));
  for (const rs of seedRows)
    for (const cell of cells(rs.filter((r) => r.run.load === OVERLOAD))) {
      const d = cell.find((r) => r.run.policy === DAEMON_ROW);
      const a = d?.result.admitted;
      if (!d || !a || d.run.maxWaitMs === undefined) continue;
      const ok = a.overBound === 0;
      all3w &&= ok;
      out.push(
        `| ${cellLabel(d.run)}${many ? `, seed ${seedOf.get(rs)}` : ""} | ${a.refusedOnce} (${pct(a.refusedOnce / d.result.requests)}) | ${d.result.refused} (${pct(d.result.refused / d.result.requests)}) | ${s3(a.waitP99S)} | ${s3(a.waitMaxS)} | ${a.overBound} (${pct(a.overBound / Math.max(1, d.result.answered))}) | ${mark(ok)} |`,
      );
    }
  out.push(
    "",
    `Overall (no admitted request waits past ${ADMISSION_WAIT_MS} ms): ${DAEMON_ROW} ${mark(all3w)}.`,
    "",
    "### Target 4: real cluster (`prefixmesh bench --compare-policies`)",
    "",
    "**Not run** by this command (simulator only).",
    "",
  );
  return out;
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
  await mkdir(outDir, { recursive: true });
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
    `- Open loop: MMLU with Zipf-skewed subjects (s = ${ZIPF_S}, questions repeat), ${o.spec.openRequests} requests, Poisson arrivals. **Capacity** is measured, not assumed: \`local\` runs the same schedule closed loop (one request in flight) on 4 and 16 nodes; its mean latency is the service time S, and capacity = nodes / S (a ${SLOW_FACTOR}× slower node counts as 1/${SLOW_FACTOR} of a node). ${o.capacities.map((c) => `${many ? `seed ${c.seed}, ` : ""}${c.nodes} nodes: S = ${s3(c.serviceS)} s, capacity ${c.rate.toFixed(2)} requests/s`).join("; ")}.`,
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
