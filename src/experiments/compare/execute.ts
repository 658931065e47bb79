/**
 * One comparison run through the simulator, kept as the compact summary the report needs (what
 * crosses the worker boundary).
 */
import { DEFAULT_PROFILE } from "../../engines/sim/profiles.js";
import { runSimulation } from "../../sim/run.js";
import type { SimConfig } from "../../sim/types.js";
import { hitRate, idealHits } from "../../workload/ideal-hit.js";
import type { Workload } from "../../workload/types.js";
import { jitterFor } from "../grid.js";
import { type CompareRun, DAEMON_ROW, ORACLE_POLICY, SLOW_FACTOR } from "./grid.js";

export interface CompareResult {
  id: string;
  requests: number;
  answered: number;
  /** Requests the client got an error for after its retries (none is dropped silently). */
  refused: number;
  meanS: number;
  p50S: number;
  p99S: number;
  actualHit: number;
  /** The workload's ideal hit rate (one cache holding every earlier prompt; routing cannot beat it). */
  idealHit: number;
  hotspotShare: number;
  forwardedShare: number;
  fallbacks: number;
  /** Bytes of anti-entropy (snapshots and heartbeats), the cost of the decentralized view. */
  gossipBytes: number;
  /** Offered rate (requests/s) of an open-loop run. */
  rate?: number;
  wallMs: number;
}

const ideal = new WeakMap<Workload, number>();

export function simConfigOf(
  run: CompareRun,
  capacityTokens: number | undefined,
  seed: number,
  freshPeerLoad: boolean,
  peerSpeed = false,
): SimConfig {
  const daemon = run.policy === DAEMON_ROW;
  const policy = run.policy === DAEMON_ROW ? "cost-aware" : run.policy;
  const oracle = policy === "oracle";
  const speed = peerSpeed && (policy === "cost-aware" || (oracle && ORACLE_POLICY === "cost-aware"));
  const node = {
    ...(freshPeerLoad ? { freshPeerLoad: true } : {}),
    ...(speed ? { policyConfig: { peerSpeed: true } } : {}),
  };
  return {
    nodes: run.nodes,
    policy: policy === "oracle" ? ORACLE_POLICY : policy,
    commMs: run.commMs,
    jitterMs: jitterFor(run.commMs),
    pollMs: 500,
    profile: DEFAULT_PROFILE,
    seed,
    keepRecords: false,
    ...(Object.keys(node).length > 0 ? { node } : {}),
    ...(oracle ? { oracle: true } : {}),
    // The daemon's node defaults under the run's own settings, calibrated at boot as a daemon is.
    ...(daemon ? { daemonConfig: true } : {}),
    ...(capacityTokens !== undefined ? { capacityTokens } : {}),
    ...(run.hetero ? { faults: { engine: { slowdowns: [{ node: 0, factor: SLOW_FACTOR }] } } } : {}),
  };
}

export function executeCompareRun(
  run: CompareRun,
  workload: Workload,
  capacityTokens: number | undefined,
  seed: number,
  rate: number | undefined,
  freshPeerLoad: boolean,
  peerSpeed: boolean,
  onProgress?: (done: number, total: number) => void,
): CompareResult {
  const r = runSimulation(
    simConfigOf(run, capacityTokens, seed, freshPeerLoad, peerSpeed),
    workload,
    onProgress ? { onProgress } : {},
  );
  const t = r.totals;
  let idealHit = ideal.get(workload);
  if (idealHit === undefined) {
    idealHit = hitRate(workload.requests, idealHits(workload.requests));
    ideal.set(workload, idealHit);
  }
  let gossipBytes = 0;
  // Full mesh: snapshots and heartbeats; gossip scuttlebutt: its SWIM and digest messages.
  for (const [kind, m] of Object.entries(t.messages))
    if (/^(snapshot|heartbeat|swim-|gossip-)/.test(kind)) gossipBytes += m.bytes;
  return {
    id: run.id,
    requests: t.requests,
    answered: t.answered,
    refused: t.failed,
    meanS: t.meanLatencyMs / 1000,
    p50S: t.p50LatencyMs / 1000,
    p99S: t.p99LatencyMs / 1000,
    actualHit: t.actualHitRate,
    idealHit,
    hotspotShare: t.hotspotShare,
    forwardedShare: t.forwardedShare,
    fallbacks: t.fallbacks,
    gossipBytes,
    ...(rate !== undefined ? { rate } : {}),
    wallMs: r.wallMs,
  };
}
