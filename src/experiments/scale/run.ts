/**
 * `prefixmesh experiment scale`: for each N and gossip mode, the node simulator (traffic, CPU,
 * memory, spread of a change, detection of a crash, hit rate, latency), the oracle beside it, a run
 * under LOSS, the bounded-memory cell, and the two protocols alone (SWIM membership and Scuttlebutt
 * rounds) that reach N the node simulator cannot. Runs go one at a time in this thread (the machine
 * is shared), so the process's CPU time during a run is that run's; a run projected past the CPU
 * budget is not started and is reported with the projection.
 */
import { mmluWorkload } from "../../workload/mmlu-workload.js";
import { syntheticMmlu } from "../../workload/synthetic.js";
import type { Workload } from "../../workload/types.js";
import { cpuSkipReason, type Measured, overBudget, overCpuBudget, type RunCost } from "./budget.js";
import { cpuMsSince } from "./cpu.js";
import { type CellKind, type CellSpec, executeCell, type NodeCell } from "./execute.js";
import {
  arrivalSAt,
  BOUNDED_ESTIMATES,
  type GossipMode,
  LOSS,
  MODES,
  nodesUpTo,
  RATE_PER_NODE,
  type ScaleOptions,
  type SeriesKey,
} from "./grid.js";
import { canCollect } from "./heap.js";
import { type MembershipCell, runMembershipCell } from "./membership.js";
import { type RoundsCell, runRoundsCell } from "./rounds.js";

export interface Skipped {
  kind: CellKind;
  mode: GossipMode;
  nodes: number;
  loss: number;
  maxEstimates?: number;
  /** Why the run was not started, with the measured figures the projection comes from. */
  reason: string;
}

export interface ScaleOutcome {
  nodes: number[];
  cells: NodeCell[];
  skipped: Skipped[];
  /** Runs of the protocols alone not started, with the projection. */
  skippedAlone: string[];
  membership: MembershipCell[];
  rounds: RoundsCell[];
  synthetic: boolean;
  arrivalS: number;
  minRequests: number;
  budgetS: number;
  heapBudgetMb: number;
  gcForced: boolean;
  /** --max-estimates of the bounded series (and of the bounded rounds). */
  boundedEstimates: number;
  wallMs: number;
  /** Process CPU (user + system) of the whole grid, ms. */
  cpuMs: number;
}

async function workloadFor(o: ScaleOptions, nodes: number): Promise<Workload> {
  const rate = RATE_PER_NODE * nodes;
  const requests = Math.max(1, Math.round(rate * arrivalSAt(o, nodes)));
  return o.source.kind === "mmlu"
    ? mmluWorkload({
        dir: o.source.dir,
        seed: o.seed,
        requests,
        openLoopRate: rate,
        ...(o.source.cacheDir ? { cacheDir: o.source.cacheDir } : {}),
      })
    : syntheticMmlu({ seed: o.seed, scale: o.source.scale, requests, openLoopRate: rate });
}

export async function runScale(o: ScaleOptions): Promise<ScaleOutcome> {
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  const nodes = nodesUpTo(o.maxNodes, o.nodes);
  const bounded = o.boundedEstimates ?? BOUNDED_ESTIMATES;
  const wanted = (key: SeriesKey): boolean => o.series === undefined || o.series.includes(key);
  const cells: NodeCell[] = [];
  const skipped: Skipped[] = [];
  const allSeries: {
    key: SeriesKey;
    kind: CellKind;
    mode: GossipMode;
    loss: number;
    maxEstimates?: number;
  }[] = [
    ...MODES.map((mode) => ({ key: `main-${mode}` as const, kind: "main" as const, mode, loss: 0 })),
    { key: "oracle", kind: "oracle", mode: "full", loss: 0 },
    ...MODES.map((mode) => ({ key: `loss-${mode}` as const, kind: "loss" as const, mode, loss: LOSS })),
    // Bounded memory (the issue's --max-estimates 64) at every N: its bytes and hit rate beside the rest.
    { key: "bounded-scuttlebutt", kind: "bounded", mode: "scuttlebutt", loss: 0, maxEstimates: bounded },
  ];
  const series = allSeries.filter((s) => wanted(s.key));
  const cost = new Map<string, RunCost[]>();
  const heap = new Map<string, Measured[]>();
  const attempt = async (s: (typeof series)[number], n: number): Promise<void> => {
    const w = cost.get(s.key) ?? [];
    const h = heap.get(s.key) ?? [];
    cost.set(s.key, w);
    heap.set(s.key, h);
    // Cost points are per base window (below): scaled back up to the window this N gets.
    const windowAt = arrivalSAt(o, n) / o.arrivalS;
    const base = {
      kind: s.kind,
      mode: s.mode,
      nodes: n,
      loss: s.loss,
      ...(s.maxEstimates ? { maxEstimates: s.maxEstimates } : {}),
    };
    const ow = overCpuBudget(w, n, o.budgetS, windowAt);
    if (ow) {
      skipped.push({ ...base, reason: cpuSkipReason(ow, o.budgetS, ` per ${o.arrivalS} s of arrivals`) });
      return;
    }
    const oh = overBudget(h, n, o.heapBudgetMb);
    if (oh) {
      skipped.push({
        ...base,
        reason: `projected heap ${oh.projected.toFixed(0)} MB > budget ${o.heapBudgetMb} MB (measured ${oh.last.v.toFixed(0)} MB at ${oh.last.n} nodes, growth ∝ N^${oh.exponent.toFixed(2)})`,
      });
      return;
    }
    o.onPhase?.(`${s.key} at ${n} nodes`);
    const spec: CellSpec = { ...base, seed: o.seed, arrivalS: arrivalSAt(o, n) };
    const cell = executeCell(spec, await workloadFor(o, n));
    cells.push(cell);
    // Time per base window: a small N's longer window must not flatten the growth. Heap is
    // state, which a shorter window does not shrink: it is projected as measured.
    const perBase = (ms: number) => ((ms / 1000) * o.arrivalS) / spec.arrivalS;
    w.push({ n, cpuS: perBase(cell.cpuMs), wallS: perBase(cell.wallMs) });
    if (cell.heapPerNodeBytes !== undefined) h.push({ n, v: (cell.heapPerNodeBytes * n) / 1e6 });
  };
  for (const n of nodes) for (const s of series) await attempt(s, n);
  const membership: MembershipCell[] = [];
  const rounds: RoundsCell[] = [];
  const swimCost: RunCost[] = [];
  const roundsCost = new Map<string, RunCost[]>();
  /** The protocols alone are budgeted like the node simulator (their skip is reported the same way). */
  const within = (points: RunCost[], n: number, kind: string): boolean => {
    const ob = overCpuBudget(points, n, o.budgetS);
    if (!ob) return true;
    skippedAlone.push(`${kind}, ${n} nodes: ${cpuSkipReason(ob, o.budgetS)}`);
    return false;
  };
  const skippedAlone: string[] = [];
  for (const n of nodes) {
    if (wanted("swim") && within(swimCost, n, "SWIM alone (both losses)")) {
      let cpuMs = 0;
      let wallMs = 0;
      for (const loss of [0, LOSS]) {
        o.onPhase?.(`SWIM alone at ${n} nodes, loss ${loss}`);
        const m = runMembershipCell(n, loss, o.seed);
        membership.push(m);
        cpuMs += m.cpuMs;
        wallMs += m.wallMs;
      }
      swimCost.push({ n, cpuS: cpuMs / 1000, wallS: wallMs / 1000 });
    }
    for (const m of wanted("rounds") ? [undefined, bounded] : []) {
      const key = m === undefined ? "all held" : `--max-estimates ${m}`;
      const w = roundsCost.get(key) ?? [];
      roundsCost.set(key, w);
      if (!within(w, n, `Scuttlebutt rounds alone (${key})`)) continue;
      o.onPhase?.(`Scuttlebutt rounds at ${n} nodes, ${key}`);
      const r = runRoundsCell(n, o.seed, m);
      rounds.push(r);
      w.push({ n, cpuS: r.cpuMs / 1000, wallS: r.wallMs / 1000 });
    }
  }
  return {
    nodes,
    cells,
    skipped,
    skippedAlone,
    membership,
    rounds,
    synthetic: o.source.kind === "synthetic",
    arrivalS: o.arrivalS,
    minRequests: o.minRequests ?? 0,
    budgetS: o.budgetS,
    heapBudgetMb: o.heapBudgetMb,
    gcForced: canCollect,
    boundedEstimates: bounded,
    wallMs: performance.now() - t0,
    cpuMs: cpuMsSince(cpu0),
  };
}
