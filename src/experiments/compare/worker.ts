/** Worker-thread entry of `experiment compare`: runs the tasks the pool hands it (each with its seed), one at a time. */
import { parentPort, workerData } from "node:worker_threads";
import type { PoolReply } from "../runner.js";
import { type CompareResult, executeCompareRun } from "./execute.js";
import type { CompareTask } from "./run.js";
import { type CompareWorkloadSpec, compareWorkload } from "./workloads.js";

const spec = workerData as CompareWorkloadSpec;
const port = parentPort!;

port.on("message", (task: CompareTask) => {
  void (async () => {
    const reply = (m: PoolReply<CompareResult>) => port.postMessage(m);
    try {
      const w = await compareWorkload({ ...spec, seed: task.seed }, task.workload);
      const rate = task.workload.kind === "open" ? task.workload.rate : undefined;
      const result = executeCompareRun(
        task.run,
        w,
        task.capacityTokens,
        task.seed,
        rate,
        spec.freshPeerLoad,
        spec.peerSpeed,
        (done, total) => reply({ type: "progress", id: task.id, done, total }),
      );
      reply({ type: "result", result });
    } catch (err) {
      reply({ type: "error", id: task.id, message: (err as Error)?.stack ?? String(err) });
    }
  })();
});
