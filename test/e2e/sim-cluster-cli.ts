/** `prefixmesh cluster` of sim nodes spawned by the e2e cluster tests, in a temp dir of their own. */
import { afterAll } from "vitest";
import { clusterTmp, type Spawned, spawnCli } from "./helpers.js";

/**
 * Returns a spawner of `prefixmesh cluster` of N nodes on the time-scaled sim engine, printing its
 * ready line as JSON, whose files go to a temp dir removed after the test file. Call it at a test
 * file's top level: it registers that file's afterAll.
 */
export function simClusterSpawner(): (nodes: number, ...extra: string[]) => Spawned {
  const tmp = clusterTmp();
  afterAll(() => tmp.remove());
  return (nodes, ...extra) =>
    spawnCli(
      [
        "cluster",
        "--nodes",
        String(nodes),
        "--engine",
        "sim",
        "--sim-time-scale",
        "0.02",
        ...extra,
        "--json",
      ],
      // Long generations keep a forward running while a node is stalled or killed: above the default ceiling.
      { ...tmp.env, PREFIXMESH_MAX_TOKENS_CEILING: "32768" },
    );
}
