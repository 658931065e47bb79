/**
 * Runs one grid configuration through the simulator and keeps a compact, serializable summary
 * (what crosses the worker boundary and lands in results.json).
 */
import { DEFAULT_PROFILE } from "../engines/sim/profiles.js";
import { runSimulation } from "../sim/run.js";
import type { MessageTotals, SimConfig } from "../sim/types.js";
import type { Workload } from "../workload/types.js";
import type { ExperimentRun } from "./grid.js";

export const NODES = 4;

export interface RunResult {
  id: string;
  capacityTokens: number;
  requests: number;
  answered: number;
  failed: number;
  incorrect: number;
  meanLatencyS: number;
  p50LatencyS: number;
  p99LatencyS: number;
  expectedHit: number;
  actualHit: number;
  hotspotShare: number;
  /**
   * Specialization: for each subject, the share of its requests served by its busiest node,
   * averaged over requests (1 = every subject lives on one node; ~0.25-0.3 = spread evenly).
   */
  subjectConcentration: number;
  forwardedShare: number;
  fallbacks: number;
  evictedTokens: number;
  servedPerNode: number[];
  messagesTotal: number;
  bytesTotal: number;
  messages: Record<string, MessageTotals>;
  virtualMs: number;
  wallMs: number;
  /** Per workload request index: the node that served it (-1 failed); timeline runs only. */
  served?: number[];
}

/** The simulator configuration of one grid run (the profile's own cache unless `capacityTokens`). */
export function simConfigFor(
  run: ExperimentRun,
  capacityTokens: number | undefined,
  seed: number,
): SimConfig {
  return {
    nodes: NODES,
    policy: run.policy,
    commMs: run.commMs,
    jitterMs: run.jitterMs,
    pollMs: run.pollMs,
    profile: DEFAULT_PROFILE,
    seed,
    ...(capacityTokens !== undefined ? { capacityTokens } : {}),
    // The report's cost-aware ablation stays the policy it measured: eviction awareness (on by
    // default) came later and moves a few forwards once the paper's caches start evicting.
    ...(run.policy === "cost-aware" ? { node: { policyConfig: { evictionAware: false } } } : {}),
  };
}

export function executeRun(
  run: ExperimentRun,
  workload: Workload,
  capacityTokens: number | undefined,
  seed: number,
  onProgress?: (done: number, total: number) => void,
): RunResult {
  const r = runSimulation(
    { ...simConfigFor(run, capacityTokens, seed), keepRecords: true },
    workload,
    onProgress ? { onProgress } : {},
  );
  const t = r.totals;
  const served = new Array<number>(t.requests).fill(-1);
  for (const rec of r.records) served[rec.index] = rec.served;
  const servedPerNode = r.perNode.map((p) => p.served);
  const out: RunResult = {
    id: run.id,
    capacityTokens: r.capacityTokens,
    requests: t.requests,
    answered: t.answered,
    failed: t.failed,
    incorrect: t.incorrect,
    meanLatencyS: t.meanLatencyMs / 1000,
    p50LatencyS: t.p50LatencyMs / 1000,
    p99LatencyS: t.p99LatencyMs / 1000,
    expectedHit: t.expectedHitRate,
    actualHit: t.actualHitRate,
    hotspotShare: t.hotspotShare,
    subjectConcentration: subjectConcentration(workload, served),
    forwardedShare: t.forwardedShare,
    fallbacks: t.fallbacks,
    evictedTokens: t.evictedTokens,
    servedPerNode,
    messagesTotal: t.messagesTotal,
    bytesTotal: t.bytesTotal,
    messages: t.messages,
    virtualMs: r.virtualMs,
    wallMs: r.wallMs,
  };
  if (run.timeline) out.served = served;
  return out;
}

export function subjectConcentration(workload: Workload, served: readonly number[]): number {
  const counts = new Map<string, number[]>();
  let total = 0;
  workload.requests.forEach((req, i) => {
    const node = served[i] ?? -1;
    if (node < 0) return;
    let c = counts.get(req.group);
    if (!c) {
      c = new Array<number>(NODES).fill(0);
      counts.set(req.group, c);
    }
    c[node]!++;
    total++;
  });
  let top = 0;
  for (const c of counts.values()) top += Math.max(...c);
  return total === 0 ? 0 : top / total;
}
