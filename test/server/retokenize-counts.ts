/** What a node's tests of peers' forwards tokenized again here read of it: refusals and open steps. */
import type { NodeMetrics } from "../../src/server/metrics.js";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";

/** Forwards `node` refused for `reason`, as `prefixmesh_forwards_refused_total` counts them. */
export async function refusedFor(node: NodeHandle, reason: string): Promise<number> {
  const { metrics } = (node.runtime as unknown as { o: { metrics: NodeMetrics } }).o;
  const { values } = await metrics.forwardsRefused.get();
  return values.find((v) => v.labels.reason === reason)?.value ?? 0;
}

/** Peers' forwards being tokenized again at `node`, as its `/cluster` shows them. */
export function peerTokenizing(node: NodeHandle): number {
  return (node.runtime.clusterView() as { peerTokenizing: number }).peerTokenizing;
}
