/**
 * A run's totals, read once at its end: the clients' outcomes, the traffic, the node counters
 * summed over the nodes alive at the end, and the engine work (each node's summary is completed here).
 */
import type { SimClients } from "./clients.js";
import type { SimNodeState } from "./run-state.js";
import type { Traffic } from "./traffic.js";
import { type SimTotals, SUMMED_STATS, type SummedStat } from "./types.js";

export function collectTotals(
  clients: SimClients,
  traffic: Traffic,
  nodes: readonly SimNodeState[],
  runsPerRequest: Uint32Array,
  engineBusyMs: number,
): SimTotals {
  const outcomes = clients.outcomes();
  const messages = traffic.totals();
  const sums = Object.fromEntries(SUMMED_STATS.map((k) => [k, 0])) as Record<SummedStat, number>;
  let evicted = 0;
  for (const s of nodes) {
    if (s.node) {
      const st = s.node.stats();
      for (const k of SUMMED_STATS) sums[k] += st[k];
      s.summary.servedForPeers += st.servedForPeers;
      s.summary.treeTokens = s.node.treeSize();
      const trust = s.node.config.peerTrust ? s.node.peers().filter((p) => p.trust !== undefined) : [];
      if (trust.length > 0) s.summary.trust = Object.fromEntries(trust.map((p) => [p.id, p.trust!]));
    }
    evicted += s.summary.evictedTokens;
  }
  let engineRuns = 0;
  let duplicateRuns = 0;
  for (const n of runsPerRequest) {
    engineRuns += n;
    if (n > 1) duplicateRuns += n - 1;
  }
  const { abandoned } = clients;
  return {
    ...outcomes,
    ...messages,
    ...sums,
    engineRuns,
    engineBusyMs,
    duplicateRuns,
    evictedTokens: evicted,
    retries: clients.retries,
    ...(abandoned > 0 ? { abandoned } : {}),
  };
}
