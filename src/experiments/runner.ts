/**
 * Runs the grid's independent configurations, in worker threads when the compiled worker exists
 * (2 cores here: two runs at once), else in this thread (tests run from TypeScript sources).
 */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import { executeRun, type RunResult } from "./execute.js";
import type { CapacityKind, ExperimentRun } from "./grid.js";
import { buildWorkload, type WorkloadSpec } from "./workloads.js";

export interface WorkerInit {
  spec: WorkloadSpec;
  capacities: Record<CapacityKind, number | undefined>;
}

export type WorkerReply =
  | { type: "progress"; id: string; done: number; total: number }
  | { type: "result"; result: RunResult }
  | { type: "error"; id: string; message: string };

export interface GridOptions {
  /** Worker threads; 0 = run in this thread. */
  workers: number;
  /** Called with requests simulated so far across the grid. */
  onProgress?(done: number, total: number): void;
  /** Requests per run (to size the progress total). */
  requestsOf(run: ExperimentRun): number;
}

/** Slowest first so the two workers finish together: fast polling is the costliest (many snapshots). */
function costOrder(runs: readonly ExperimentRun[]): ExperimentRun[] {
  const cost = (r: ExperimentRun) => (r.pollMs < 100 ? 3 : r.capacity === "constrained" ? 2 : 1);
  return [...runs].sort((a, b) => cost(b) - cost(a));
}

export async function runGrid(
  runs: readonly ExperimentRun[],
  init: WorkerInit,
  opts: GridOptions,
): Promise<Map<string, RunResult>> {
  const total = runs.reduce((a, r) => a + opts.requestsOf(r), 0);
  const doneBy = new Map<string, number>();
  let done = 0;
  const progress = (id: string, d: number) => {
    done += d - (doneBy.get(id) ?? 0);
    doneBy.set(id, d);
    opts.onProgress?.(done, total);
  };
  const workerUrl = new URL("./worker.js", import.meta.url);
  const canThread = opts.workers > 0 && existsSync(fileURLToPath(workerUrl));
  const results = new Map<string, RunResult>();
  const queue = costOrder(runs);
  if (!canThread) {
    for (const run of queue) {
      const w = await buildWorkload(init.spec, run.workload);
      results.set(
        run.id,
        executeRun(run, w, init.capacities[run.capacity], init.spec.seed, (d) => progress(run.id, d)),
      );
    }
    return results;
  }
  for (const [id, r] of await runInWorkers<ExperimentRun, RunResult>(
    workerUrl,
    init,
    queue,
    opts.workers,
    progress,
  ))
    results.set(id, r);
  return results;
}

/** What a pool worker posts back: progress of a task, its result, or its error. */
export type PoolReply<R> =
  | { type: "progress"; id: string; done: number; total: number }
  | { type: "result"; id?: string; result: R }
  | { type: "error"; id: string; message: string };

/**
 * The worker pool every experiment uses: `workers` threads of `workerUrl` (each started with
 * `workerData`), each taking the next task of `tasks` (in order) until none is left. Tasks are
 * posted as they are; the worker answers with `PoolReply`s.
 */
export async function runInWorkers<T extends { id: string }, R>(
  workerUrl: URL,
  workerData: unknown,
  tasks: readonly T[],
  workers: number,
  progress: (id: string, done: number) => void,
): Promise<Map<string, R>> {
  const queue = [...tasks];
  const results = new Map<string, R>();
  const n = Math.min(workers, queue.length);
  await Promise.all(
    Array.from({ length: n }, async () => {
      const worker = new Worker(workerUrl, { workerData });
      try {
        for (let task = queue.shift(); task; task = queue.shift()) {
          results.set(task.id, await runOn<T, R>(worker, task, progress));
        }
      } finally {
        await worker.terminate();
      }
    }),
  );
  return results;
}

function runOn<T extends { id: string }, R>(
  worker: Worker,
  run: T,
  progress: (id: string, done: number) => void,
): Promise<R> {
  return new Promise((resolve, reject) => {
    const onMessage = (m: PoolReply<R>) => {
      if (m.type === "progress") progress(m.id, m.done);
      else {
        cleanup();
        if (m.type === "result") resolve(m.result);
        else reject(new Error(`experiment run ${m.id} failed: ${m.message}`));
      }
    };
    const onError = (err: Error) => {
      cleanup();
      reject(err);
    };
    const onExit = (code: number) => {
      cleanup();
      reject(new Error(`experiment worker exited with code ${code} during ${run.id}`));
    };
    const cleanup = () => {
      worker.off("message", onMessage);
      worker.off("error", onError);
      worker.off("exit", onExit);
    };
    worker.on("message", onMessage);
    worker.on("error", onError);
    worker.on("exit", onExit);
    worker.postMessage(run);
  });
}
