/**
 * `prefixmesh experiment compare`: the comparison grid through the simulator in two phases — closed
 * loop first (with the runs that measure each cluster's capacity), then open loop at fractions of
 * that capacity — once per seed (every seed's runs share each phase's worker pool), written out as
 * report.md, results.json and figures.
 */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { DEFAULT_PROFILE, resolveProfile } from "../../engines/sim/profiles.js";
import { runInWorkers } from "../runner.js";
import { buildWorkload, constrainedCapacity, type WorkloadSource } from "../workloads.js";
import { type CompareResult, executeCompareRun } from "./execute.js";
import { type CompareRun, closedGrid, DAEMON_ROW, openGrid, SLOW_FACTOR } from "./grid.js";
import type { SeedRow } from "./seeds.js";
import { type CompareWorkloadKind, type CompareWorkloadSpec, compareWorkload } from "./workloads.js";

export interface CompareTask {
  /** The run's id and its seed: a task is one run of one seed. */
  id: string;
  seed: number;
  run: CompareRun;
  workload: CompareWorkloadKind;
  capacityTokens?: number;
}

export interface CompareOptions {
  source: WorkloadSource;
  /** Every run is run once per seed (schedules and simulator), in this order. */
  seeds: number[];
  closedRequests: number;
  openRequests: number;
  /** Every node runs with `freshPeerLoad` (default false: load on snapshot headers only, the paper's). */
  freshPeerLoad?: boolean;
  /** cost-aware and the oracle with `peerSpeed` (default false). */
  peerSpeed?: boolean;
  workers: number;
  /**
   * Only the runs whose id (e.g. `closed-cost-aware-n4-c200-constrained`) this matches; the
   * capacity runs are made only if an open-loop run is kept. Undefined: the whole grid.
   */
  cells?: RegExp;
  onPhase?(phase: string): void;
  onProgress?(done: number, total: number): void;
}

/** How a cluster's capacity was measured: `local`, closed loop, on the open-loop schedule. */
export interface Capacity {
  seed: number;
  nodes: number;
  /** Mean service time per request (s): that run's mean latency (one request in flight). */
  serviceS: number;
  /** Requests/s the cluster serves when every node is busy: nodes / serviceS. */
  rate: number;
}

export interface CompareOutcome {
  seeds: number[];
  /** Every run of every seed, seed by seed. */
  runs: SeedRow[];
  /** Each seed's measured capacities (its own open-loop schedule). */
  capacities: Capacity[];
  /** Each seed's constrained cache (tokens), in `seeds` order. */
  constrainedTokens: number[];
  paperTokens: number;
  /** The workload settings every seed shares (`seed`: the first seed's). */
  spec: CompareWorkloadSpec;
  synthetic: boolean;
  wallMs: number;
}

/** Slowest first, so the workers finish together: 16 nodes and the oracle's view cost the most. */
function cost(t: CompareTask): number {
  const p = t.run.policy;
  const global = p === "oracle" || p === "centralized" ? 2 : p === DAEMON_ROW ? 1.5 : 1;
  return t.run.nodes * global * (t.workload.kind === "open" ? 1.5 : 1);
}

const taskId = (id: string, seed: number) => `${id}@s${seed}`;

export async function runCompare(opts: CompareOptions): Promise<CompareOutcome> {
  const t0 = performance.now();
  const seeds = opts.seeds;
  if (seeds.length === 0 || new Set(seeds).size !== seeds.length)
    throw new Error("runCompare: seeds must be distinct and at least one");
  const spec: CompareWorkloadSpec = {
    source: opts.source,
    seed: seeds[0] as number,
    closedRequests: opts.closedRequests,
    openRequests: opts.openRequests,
    freshPeerLoad: opts.freshPeerLoad ?? false,
    peerSpeed: opts.peerSpeed ?? false,
  };
  opts.onPhase?.("building workloads");
  // The constrained cache is the paper experiment's (a quarter of the full uniform working set).
  const constrainedTokens: number[] = [];
  for (const seed of seeds)
    constrainedTokens.push(
      constrainedCapacity(await buildWorkload({ source: opts.source, seed }, "uniform")),
    );
  const constrainedOf = new Map(seeds.map((s, i) => [s, constrainedTokens[i] as number]));
  const paperTokens = resolveProfile(DEFAULT_PROFILE).capacityTokens;
  const capOf = (run: CompareRun, seed: number) =>
    run.memory === "constrained" ? { capacityTokens: constrainedOf.get(seed) as number } : {};

  const keep = (run: CompareRun) => opts.cells === undefined || opts.cells.test(run.id);
  const openRuns = openGrid().filter(keep);
  const calibration = (openRuns.length === 0 ? [] : seeds).flatMap((seed) =>
    [4, 16].map(
      (nodes): CompareTask => ({
        id: taskId(`capacity-n${nodes}`, seed),
        seed,
        run: {
          id: `capacity-n${nodes}`,
          slice: "open",
          policy: "local",
          nodes,
          commMs: 2,
          memory: "paper",
          hetero: false,
        },
        workload: { kind: "open-closed" },
      }),
    ),
  );
  const closed = seeds.flatMap((seed) =>
    closedGrid()
      .filter(keep)
      .map(
        (run): CompareTask => ({
          id: taskId(run.id, seed),
          seed,
          run,
          workload: { kind: "closed" },
          ...capOf(run, seed),
        }),
      ),
  );
  const openCount = openRuns.length * seeds.length;
  opts.onPhase?.("simulating closed loop");
  const first = await pool(
    spec,
    [...calibration, ...closed],
    opts,
    0,
    opts.closedRequests * (closed.length + calibration.length) + opts.openRequests * openCount,
  );

  const capacities: Capacity[] = calibration.map((t) => {
    const r = first.get(t.id) as CompareResult;
    return { seed: t.seed, nodes: t.run.nodes, serviceS: r.meanS, rate: t.run.nodes / r.meanS };
  });
  const rateFor = (run: CompareRun, seed: number): number => {
    const c = capacities.find((x) => x.nodes === run.nodes && x.seed === seed) as Capacity;
    // A node SLOW_FACTOR× slower serves 1/SLOW_FACTOR of a node's rate.
    const effective = run.hetero ? run.nodes - 1 + 1 / SLOW_FACTOR : run.nodes;
    return ((run.load ?? 1) * effective) / c.serviceS;
  };
  const open = seeds.flatMap((seed) =>
    openRuns.map(
      (run): CompareTask => ({
        id: taskId(run.id, seed),
        seed,
        run,
        workload: { kind: "open", rate: rateFor(run, seed) },
        ...capOf(run, seed),
      }),
    ),
  );
  const closedDone = opts.closedRequests * (closed.length + calibration.length);
  if (open.length > 0) opts.onPhase?.("simulating open loop");
  const second =
    open.length === 0
      ? new Map<string, CompareResult>()
      : await pool(spec, open, opts, closedDone, closedDone + opts.openRequests * open.length);

  // Seed by seed, each seed's runs in grid order.
  const runs: SeedRow[] = seeds.flatMap((seed) =>
    [...closed, ...open]
      .filter((t) => t.seed === seed)
      .map((t) => ({
        seed,
        run: t.run,
        result: (first.get(t.id) ?? second.get(t.id)) as CompareResult,
      })),
  );
  return {
    seeds,
    runs,
    capacities,
    constrainedTokens,
    paperTokens,
    spec,
    synthetic: opts.source.kind === "synthetic",
    wallMs: performance.now() - t0,
  };
}

async function pool(
  spec: CompareWorkloadSpec,
  tasks: CompareTask[],
  opts: CompareOptions,
  base: number,
  total: number,
): Promise<Map<string, CompareResult>> {
  const sorted = [...tasks].sort((a, b) => cost(b) - cost(a));
  const doneBy = new Map<string, number>();
  let done = base;
  const progress = (id: string, d: number) => {
    done += d - (doneBy.get(id) ?? 0);
    doneBy.set(id, d);
    opts.onProgress?.(done, total);
  };
  const workerUrl = new URL("./worker.js", import.meta.url);
  if (opts.workers > 0 && existsSync(fileURLToPath(workerUrl)))
    return runInWorkers<CompareTask, CompareResult>(workerUrl, spec, sorted, opts.workers, progress);
  // In this thread (tests run from TypeScript sources, where the compiled worker does not exist).
  const out = new Map<string, CompareResult>();
  for (const t of sorted) {
    const w = await compareWorkload({ ...spec, seed: t.seed }, t.workload);
    const rate = t.workload.kind === "open" ? t.workload.rate : undefined;
    out.set(
      t.id,
      executeCompareRun(t.run, w, t.capacityTokens, t.seed, rate, spec.freshPeerLoad, spec.peerSpeed, (d) =>
        progress(t.id, d),
      ),
    );
  }
  return out;
}
