/**
 * Worker-thread entry: builds the workloads once from their description, then runs the grid
 * configurations the main thread hands it, one at a time, reporting progress and results.
 */
import { parentPort, workerData } from "node:worker_threads";
import { executeRun } from "./execute.js";
import type { ExperimentRun } from "./grid.js";
import type { WorkerInit, WorkerReply } from "./runner.js";
import { buildWorkload } from "./workloads.js";

const init = workerData as WorkerInit;
const port = parentPort!;

port.on("message", (run: ExperimentRun) => {
  void (async () => {
    const reply = (m: WorkerReply) => port.postMessage(m);
    try {
      const w = await buildWorkload(init.spec, run.workload);
      const result = executeRun(run, w, init.capacities[run.capacity], init.spec.seed, (done, total) =>
        reply({ type: "progress", id: run.id, done, total }),
      );
      reply({ type: "result", result });
    } catch (err) {
      reply({ type: "error", id: run.id, message: (err as Error)?.stack ?? String(err) });
    }
  })();
});
