/**
 * A run's options as the loop reads them: the config checked (`validate`), the mesh protocol it runs
 * (`simGossip`), the settings every node shares, and the open loop's follow-up turns.
 */
import { DAEMON_NODE_DEFAULTS } from "../core/node/config.js";
import { resolveSwimConfig } from "../core/node/swim/config.js";
import type { Workload } from "../workload/types.js";
import { checkFaults } from "./fault-schedule.js";
import type { SimConfig } from "./types.js";

/**
 * The run's mesh protocol: as configured, else the daemon's when running as the daemon does (the
 * oracle, and the centralized baseline on it, push full-mesh snapshots: the full mesh for them).
 */
export function simGossip(c: SimConfig): "full" | "scuttlebutt" {
  if (c.gossip !== undefined) return c.gossip;
  if (c.daemonConfig !== true || c.oracle === true || c.policy === "centralized") return "full";
  return DAEMON_NODE_DEFAULTS.gossip;
}

/** A simulation config that cannot run: the caller's input, told as such (the CLI prints its message). */
export class SimConfigError extends RangeError {}

export function validate(c: SimConfig, requests: number): void {
  const bad = (m: string): never => {
    throw new SimConfigError(`invalid simulation config: ${m}`);
  };
  if (!Number.isInteger(c.nodes) || c.nodes < 1 || c.nodes > 1024)
    bad(`nodes must be 1-1024, got ${c.nodes}`);
  if (!(c.commMs >= 0)) bad(`commMs must be ≥ 0, got ${c.commMs}`);
  if (!(c.jitterMs >= 0)) bad(`jitterMs must be ≥ 0, got ${c.jitterMs}`);
  if (!(c.pollMs > 0)) bad(`pollMs must be > 0, got ${c.pollMs}`);
  if (c.capacityTokens !== undefined && !(c.capacityTokens > 0)) bad(`capacityTokens must be > 0`);
  if (!Number.isFinite(c.seed)) bad(`seed must be a number`);
  if (c.gossip !== undefined && c.gossip !== "full" && c.gossip !== "scuttlebutt")
    bad(`gossip must be "full" or "scuttlebutt", got ${String(c.gossip)}`);
  // The mode the nodes run: the node config's, spread over the run's (nodeSettings).
  const nodeGossip = c.node?.gossip ?? simGossip(c);
  // The oracle pushes full-mesh snapshots: it has no meaning under scuttlebutt.
  if (nodeGossip === "scuttlebutt" && (c.oracle === true || c.policy === "centralized"))
    bad(`oracle (and centralized, which runs on it) runs with gossip "full" only`);
  if (c.maxEstimates !== undefined && !(Number.isInteger(c.maxEstimates) && c.maxEstimates >= 1))
    bad(`maxEstimates must be a positive integer, got ${c.maxEstimates}`);
  // Bounded estimates are scuttlebutt's: the full mesh holds every member's.
  if (c.maxEstimates !== undefined && nodeGossip === "full") bad(`maxEstimates needs gossip "scuttlebutt"`);
  // The full mesh is told its members and checks none: a node without the credential would be no fault.
  if (nodeGossip === "full" && (c.faults?.node?.unauthenticated?.length ?? 0) > 0)
    bad(`unauthenticated nodes need gossip "scuttlebutt" (the full mesh checks no member)`);
  // SWIM's cross-field checks are no part of the node schema: else each node's constructor throws them.
  if (nodeGossip === "scuttlebutt" && c.node?.swim !== undefined) {
    try {
      resolveSwimConfig(c.node.swim);
    } catch (err) {
      bad((err as Error).message);
    }
  }
  checkFaults(c.faults ?? {}, c.nodes, bad, requests);
}

/** Every node's settings bar its id and seeds (what `boot` gives each, and what sharing reads). */
export function nodeSettings(config: SimConfig, gossip: "full" | "scuttlebutt") {
  return {
    ...(config.daemonConfig === true ? DAEMON_NODE_DEFAULTS : {}),
    // Scuttlebutt mode: nobody is told the members, only two seeds (n0, n1); SWIM does the rest.
    ...(gossip === "full"
      ? { gossip }
      : { gossip, maxPeers: config.nodes - 1, maxEstimates: config.maxEstimates }),
    ...config.node,
  };
}

/**
 * Open loop: the follow-up turns (chat) of each request, sent a think time after it is answered
 * (none in a closed loop, which sends the next request as one is answered).
 */
export function followUpsOf(workload: Workload): Map<number, number[]> {
  const followUps = new Map<number, number[]>();
  if (workload.arrival === "closed-loop") return followUps;
  workload.requests.forEach((r, i) => {
    if (!r.after) return;
    const p = r.after.request;
    if (!(Number.isInteger(p) && p >= 0 && p < i))
      throw new RangeError(`workload request ${i} follows request ${p}, which is not an earlier one`);
    if (!(r.after.thinkMs >= 0 && Number.isFinite(r.after.thinkMs)))
      throw new RangeError(`workload request ${i}: think time must be ≥ 0 ms, got ${r.after.thinkMs}`);
    const list = followUps.get(p);
    if (list) list.push(i);
    else followUps.set(p, [i]);
  });
  return followUps;
}
