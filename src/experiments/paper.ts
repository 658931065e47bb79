/**
 * `prefixmesh experiment paper`: the paper's §5 grid through the simulator, written out as
 * report.md (each table as paper / ours / ratio), results.json and every figure as SVG + PNG.
 */
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { DEFAULT_PROFILE, resolveProfile } from "../engines/sim/profiles.js";
import { makeDir } from "../net/make-dir.js";
import { hitRate, idealHits } from "../workload/ideal-hit.js";
import type { Workload } from "../workload/types.js";
import {
  pickSubjects,
  type ShareWindow,
  SPECIALIZED_SHARE,
  STRIDE,
  shareWindows,
  WINDOW,
  type ZoneSegment,
  zoneSummary,
  zones,
} from "./analysis.js";
import { NODES } from "./execute.js";
import { barFigure, figure2, type LatencyPoint, shareFigure } from "./figures.js";
import { paperGrid, RUN, smallGrid, type WorkloadKind } from "./grid.js";
import { PAPER_SETUP, PAPER_TABLE1, PAPER_TABLE2, PAPER_TABLE3 } from "./paper-data.js";
import { renderVegaLite } from "./render.js";
import { writeReport } from "./report.js";
import type { CycleStats, PaperResults, RunSummary, ShareFigureData, WorkloadSummary } from "./results.js";
import { runGrid } from "./runner.js";
import {
  buildWorkload,
  CONSTRAINED_FRACTION,
  constrainedCapacity,
  prefixWorkingSet,
  type WorkloadSpec,
} from "./workloads.js";

export interface PaperOptions {
  /** MMLU folder; absent = the synthetic MMLU-shaped workload (the report says so at the top). */
  mmluDir?: string;
  outDir: string;
  seed: number;
  /** "paper" = the full grid; "small" = a handful of runs (tests, quick looks). */
  grid?: "paper" | "small";
  /** Synthetic pool scale (1 = MMLU-sized); tests shrink it. */
  syntheticScale?: number;
  workers?: number;
  cacheDir?: string;
  /** The command line to print in the report. */
  command?: string;
  onProgress?(done: number, total: number): void;
  /** Called once per phase, for a status line. */
  onPhase?(phase: string): void;
}

const FIG3 = [
  { id: RUN.s2, label: "skewed, routed" },
  { id: RUN.u2, label: "uniform, routed" },
  { id: RUN.uNo, label: "uniform, no-route" },
  { id: RUN.uPoll300k, label: "uniform, routed, Δpoll 300 s" },
];
const FIG4 = [
  { id: RUN.u200, label: "Δcomm 200 ms, paper memory" },
  { id: RUN.u200Small, label: "Δcomm 200 ms, constrained cache" },
  { id: RUN.u2Small, label: "Δcomm 2 ms, constrained cache" },
];

export async function runPaperExperiment(opts: PaperOptions): Promise<PaperResults> {
  const t0 = performance.now();
  const spec: WorkloadSpec = {
    source: opts.mmluDir
      ? { kind: "mmlu", dir: opts.mmluDir, ...(opts.cacheDir ? { cacheDir: opts.cacheDir } : {}) }
      : { kind: "synthetic", scale: opts.syntheticScale ?? 1 },
    seed: opts.seed,
  };
  const runs = opts.grid === "small" ? smallGrid() : paperGrid();
  const kinds = [...new Set(runs.map((r) => r.workload))];

  opts.onPhase?.("building workloads");
  const workloads = new Map<WorkloadKind, Workload>();
  for (const k of kinds) workloads.set(k, await buildWorkload(spec, k));
  const uniform = workloads.get("uniform") ?? (await buildWorkload(spec, "uniform"));
  const profile = resolveProfile(DEFAULT_PROFILE);
  const workingSet = prefixWorkingSet(uniform);
  const capacities = {
    paper: profile.capacityTokens,
    constrained: constrainedCapacity(uniform),
    constrainedFraction: CONSTRAINED_FRACTION,
    prefixWorkingSet: workingSet,
  };

  opts.onPhase?.("simulating");
  const results = await runGrid(
    runs,
    { spec, capacities: { paper: undefined, constrained: capacities.constrained } },
    {
      workers: opts.workers ?? 0,
      requestsOf: (r) => workloads.get(r.workload)!.requests.length,
      ...(opts.onProgress ? { onProgress: opts.onProgress } : {}),
    },
  );

  opts.onPhase?.("ideal hit rates and figures");
  const summaries: Record<string, WorkloadSummary> = {};
  for (const [kind, w] of workloads) {
    const hits = idealHits(w.requests);
    summaries[kind] = {
      kind,
      name: w.name,
      schedule: w.meta?.schedule ?? "",
      requests: w.requests.length,
      distinctPrompts: w.requests.length - (w.meta?.repeatedRequests ?? 0),
      repeatedRequests: w.meta?.repeatedRequests ?? 0,
      meanPromptTokens: w.meta?.meanPromptTokens ?? 0,
      idealHit: hitRate(w.requests, hits),
      ...(w.meta?.hotGroups && kind !== "uniform" ? { hotGroups: w.meta.hotGroups } : {}),
    };
  }
  const runSummaries: RunSummary[] = runs.map((run) => {
    const { id: _id, served: _served, ...rest } = results.get(run.id)!;
    return { ...run, ...rest, idealHit: summaries[run.workload]!.idealHit };
  });

  const groupsOf = (kind: WorkloadKind) => workloads.get(kind)!.requests.map((r) => r.group);
  const fig3Subjects = pickSubjects(
    [
      ...new Set(FIG3.map((f) => runs.find((r) => r.id === f.id)?.workload).filter((k) => k !== undefined)),
    ].map(groupsOf),
  );
  const panelsFor = (
    defs: readonly { id: string; label: string }[],
    subjects: string[],
    withZones: boolean,
  ): ShareFigureData["panels"] => {
    const panels: ShareFigureData["panels"] = [];
    for (const d of defs) {
      const run = runs.find((r) => r.id === d.id);
      const served = results.get(d.id)?.served;
      if (!run || !served) continue;
      for (const subject of subjects) {
        const windows: ShareWindow[] = shareWindows(groupsOf(run.workload), served, subject, NODES);
        const z: ZoneSegment[] = zones(windows);
        panels.push({
          config: d.label,
          subject,
          windows,
          ...(withZones ? { zones: z, zoneSummary: zoneSummary(z) } : {}),
        });
      }
    }
    return panels;
  };
  const figure3: ShareFigureData = { subjects: fig3Subjects, panels: panelsFor(FIG3, fig3Subjects, false) };
  // Figure 4: zone statistics over every subject large enough for a window, in each configuration;
  // the figure shows the two subjects with the most complete cycle in the constrained Δcomm-200 run
  // (the paper, too, shows two subjects it chose), and the report gives the counts for all of them.
  const uniformGroups = groupsOf("uniform");
  const large = [...new Set(uniformGroups)].filter(
    (g) => uniformGroups.filter((x) => x === g).length >= WINDOW,
  );
  const cycles: CycleStats[] = [];
  const cycleScore = new Map<string, number>();
  for (const d of FIG4) {
    const run = runs.find((r) => r.id === d.id);
    const served = results.get(d.id)?.served;
    if (!run || !served) continue;
    const st: CycleStats = {
      config: d.label,
      subjects: large.length,
      withSpecialization: 0,
      withRedispersion: 0,
      withAllThree: 0,
    };
    for (const subject of large) {
      const z = zoneSummary(zones(shareWindows(uniformGroups, served, subject, NODES)));
      if (z.specialized > 0) st.withSpecialization++;
      if (z["re-dispersed"] > 0) st.withRedispersion++;
      const all = z.competitive > 0 && z.specialized > 0 && z["re-dispersed"] > 0;
      if (all) st.withAllThree++;
      if (d.id === RUN.u200Small) {
        const kinds =
          (z.competitive > 0 ? 1 : 0) + (z.specialized > 0 ? 1 : 0) + (z["re-dispersed"] > 0 ? 1 : 0);
        cycleScore.set(subject, kinds * 10_000 + z["re-dispersed"] * 100 + z.specialized);
      }
    }
    cycles.push(st);
  }
  const fig4Subjects =
    cycleScore.size > 0
      ? [...cycleScore.entries()]
          .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
          .slice(0, 2)
          .map(([g]) => g)
      : pickSubjects([uniformGroups]);
  const figure4: ShareFigureData = {
    subjects: fig4Subjects,
    selection:
      cycleScore.size > 0
        ? "the two subjects with the most complete cycle in the constrained Δcomm 200 ms run"
        : "the two subjects with the most requests",
    panels: panelsFor(FIG4, fig4Subjects, true),
    cycles,
  };

  const synthetic = uniform.synthetic;
  const out: PaperResults = {
    generatedBy: "prefixmesh experiment paper",
    command: opts.command ?? "prefixmesh experiment paper",
    synthetic,
    seed: opts.seed,
    nodes: NODES,
    profile,
    ...(uniform.meta?.encoding ? { encoding: uniform.meta.encoding } : {}),
    capacities,
    workloads: summaries,
    runs: runSummaries,
    figure3,
    figure4,
    paper: { table1: PAPER_TABLE1, table2: PAPER_TABLE2, table3: PAPER_TABLE3, setup: PAPER_SETUP },
    wallMs: 0,
  };

  await makeDir(opts.outDir, 0o777, (m) => new Error(m));
  const figures = buildFigures(out);
  await Promise.all(
    Object.entries(figures).map(async ([name, spec]) => {
      const { svg, png } = await renderVegaLite(spec);
      await writeFile(join(opts.outDir, `${name}.svg`), svg);
      await writeFile(join(opts.outDir, `${name}.png`), png);
    }),
  );
  out.wallMs = performance.now() - t0;
  await writeFile(join(opts.outDir, "results.json"), `${JSON.stringify(out, null, 1)}\n`);
  await writeFile(join(opts.outDir, "report.md"), reportFromResults(out));
  return out;
}

/**
 * report.md from a results.json: what the command writes, without running the grid again (the test
 * that keeps the committed report in step with its generator reads the committed results).
 */
export function reportFromResults(r: PaperResults): string {
  return writeReport(r, Object.keys(buildFigures(r)));
}

function buildFigures(r: PaperResults) {
  const byId = new Map(r.runs.map((x) => [x.id, x]));
  const src = r.synthetic ? "synthetic MMLU-shaped workload" : "MMLU";
  const points: LatencyPoint[] = [];
  for (const p of PAPER_TABLE1.comm) {
    points.push({ commMs: p.commMs, latencyS: p.routed, policy: "routed", source: "paper" });
    points.push({ commMs: p.commMs, latencyS: p.noRoute, policy: "no-route", source: "paper" });
    const ours = byId.get(`uniform-affinity-c${p.commMs}-p500`);
    if (ours)
      points.push({ commMs: p.commMs, latencyS: ours.meanLatencyS, policy: "routed", source: "ours" });
    const base = byId.get(RUN.uNo);
    if (base)
      points.push({ commMs: p.commMs, latencyS: base.meanLatencyS, policy: "no-route", source: "ours" });
    // Beyond the paper: cost-aware where the grid ran it.
    const cost = byId.get(`uniform-cost-aware-c${p.commMs}-p500`);
    if (cost)
      points.push({ commMs: p.commMs, latencyS: cost.meanLatencyS, policy: "cost-aware", source: "ours" });
  }
  const figs: Record<string, ReturnType<typeof figure2>> = {
    figure2: figure2(
      points,
      `${src}, Δpoll 500 ms; solid lines and circles = ours (simulator), dashed lines and squares = the paper's; cost-aware is ours only`,
    ),
  };
  if (r.figure3.panels.length > 0) {
    figs.figure3 = shareFigure(
      "Figure 3: per-node share of a subject's requests over time",
      `${src}; window ${WINDOW} requests, stride ${STRIDE}; Δcomm 2 ms, Δpoll 500 ms unless noted`,
      r.figure3.panels,
      false,
    );
  }
  if (r.figure4.panels.length > 0) {
    figs.figure4 = shareFigure(
      "Figure 4: the specialization–eviction cycle (zones shaded)",
      `${src}; routed, Δpoll 500 ms; zone 2 = one node serves ≥ ${SPECIALIZED_SHARE * 100}% of the window`,
      r.figure4.panels,
      true,
    );
  }
  const hot = [
    { id: RUN.uNo, label: "uniform, no-route", paper: PAPER_TABLE3.uniformNoRoute },
    { id: RUN.sNo, label: "skewed, no-route", paper: PAPER_TABLE3.skewedNoRoute },
    { id: RUN.u1000, label: "Δcomm 1 s", paper: PAPER_TABLE3.comm[0].hotspot },
    { id: RUN.u200, label: "Δcomm 200 ms", paper: PAPER_TABLE3.comm[1].hotspot },
    { id: RUN.u2, label: "Δcomm 2 ms", paper: PAPER_TABLE3.comm[2].hotspot },
    { id: RUN.uPoll20, label: "Δpoll 20 ms", paper: PAPER_TABLE3.poll[0].hotspot },
    { id: RUN.uPoll100, label: "Δpoll 100 ms", paper: PAPER_TABLE3.poll[1].hotspot },
    { id: RUN.uPoll2000, label: "Δpoll 2 s", paper: PAPER_TABLE3.poll[2].hotspot },
    { id: RUN.uPoll300k, label: "Δpoll 300 s", paper: PAPER_TABLE3.poll[3].hotspot },
    { id: RUN.s2, label: "skewed, routed", paper: PAPER_TABLE3.skewedRouted },
    { id: RUN.uArg, label: "Δcomm 2 ms, literal argmax", paper: PAPER_TABLE3.comm[2].hotspot },
    { id: RUN.uArgPoll300k, label: "Δpoll 300 s, literal argmax", paper: PAPER_TABLE3.poll[3].hotspot },
    { id: RUN.sArg, label: "skewed, literal argmax", paper: PAPER_TABLE3.skewedRouted },
  ];
  const hotRows = hot.flatMap((h) => {
    const ours = byId.get(h.id);
    return ours
      ? [
          { config: h.label, value: h.paper, source: "paper" },
          { config: h.label, value: ours.hotspotShare, source: "ours" },
        ]
      : [];
  });
  figs.hotspots = barFigure(
    "Table 3 as a chart: hotspot share",
    `${src}; ${100 / r.nodes}% = perfectly even over ${r.nodes} nodes`,
    "busiest node's share (%)",
    hotRows,
  );
  const hitDefs = [
    { id: RUN.uNo, label: "uniform, no-route", paper: PAPER_TABLE2.uniformNoRoute.actualHit },
    { id: RUN.u2, label: "uniform, routed", paper: PAPER_TABLE2.uniformRouted.actualHit },
    { id: RUN.sNo, label: "skewed, no-route", paper: PAPER_TABLE2.skewedNoRoute.actualHit },
    { id: RUN.s2, label: "skewed, routed", paper: PAPER_TABLE2.skewedRouted.actualHit },
    { id: RUN.uNoSmall, label: "uniform, no-route, small cache", paper: undefined },
    { id: RUN.u2Small, label: "uniform, routed, small cache", paper: undefined },
  ];
  const hitRows = hitDefs.flatMap((h) => {
    const ours = byId.get(h.id);
    if (!ours) return [];
    const rows = [
      { config: h.label, value: ours.actualHit, source: "ours (actual)" },
      { config: h.label, value: ours.idealHit, source: "ideal bound" },
    ];
    if (h.paper !== undefined) rows.unshift({ config: h.label, value: h.paper, source: "paper (actual)" });
    return rows;
  });
  figs.hitrates = barFigure(
    "Cache-hit rate vs the ideal bound",
    `${src}; Δcomm 2 ms, Δpoll 500 ms`,
    "prompt tokens hit (%)",
    hitRows,
  );
  return figs;
}
