/**
 * N `prefixmesh node` processes on 127.0.0.1 running the time-scaled sim engine, every node a static
 * peer of every other (plain HTTP peer ports, `--insecure`): for multi-process tests that need
 * per-node flags (`extra`), which `prefixmesh cluster` does not give.
 */
import { freePort } from "../../src/server/cluster/launcher.js";
import { type Spawned, spawnCli, waitAllReady } from "./helpers.js";

export interface SimNodes {
  ids: string[];
  /** API base URL per node, in `ids` order. */
  api: string[];
  procs: Spawned[];
  stop(): Promise<void>;
}

export async function startSimNodes(
  ids: string[],
  extra: (id: string, i: number) => string[] = () => [],
): Promise<SimNodes> {
  const ports = await Promise.all(ids.flatMap(() => [freePort("127.0.0.1"), freePort("127.0.0.1")]));
  const api = ids.map((_, i) => `http://127.0.0.1:${ports[2 * i]}`);
  const peerUrl = (i: number) => `${ids[i]}=http://127.0.0.1:${ports[2 * i + 1]}`;
  const procs = ids.map((id, i) =>
    spawnCli([
      "node",
      ...[
        "--id",
        id,
        "--listen",
        `127.0.0.1:${ports[2 * i]}`,
        "--peer-listen",
        `127.0.0.1:${ports[2 * i + 1]}`,
      ],
      ...["--peers", ids.flatMap((_, j) => (j === i ? [] : [peerUrl(j)])).join(","), "--insecure"],
      ...["--engine", "sim", "--sim-time-scale", "0.02", "--poll-ms", "250", "--log-level", "warn"],
      ...extra(id, i),
    ]),
  );
  const stop = async () => {
    for (const p of procs) if (p.child.exitCode === null) p.child.kill("SIGTERM");
    await Promise.all(procs.map((p) => p.exited));
  };
  try {
    await waitAllReady(api, 60_000, `nodes ${ids.join(", ")} ready`);
  } catch (err) {
    await stop();
    throw new Error(`${(err as Error).message}\n${procs.map((p) => p.output()).join("\n")}`);
  }
  return { ids, api, procs, stop };
}
