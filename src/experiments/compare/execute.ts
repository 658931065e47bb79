/**
 * One comparison run through the simulator, kept as the compact summary the report needs (what
 * crosses the worker boundary).
 */
import { DEFAULT_PROFILE } from "../../engines/sim/profiles.js";
import { runSimulation } from "../../sim/run.js";
import type { SimConfig, SimRecord } from "../../sim/types.js";
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
  /**
   * With admission (`run.maxWaitMs`): how long answered requests waited from their admission (the
   * entry node taking the try that was answered) to the start of their engine run — queues,
   * forwards, fallbacks; a refused try's back-off is not a wait — p99 and max, how many waited
   * longer than the bound, and how many were refused at least once (a client retries a refusal
   * after its Retry-After; `refused` counts those still refused after every retry).
   */
  admitted?: { waitP99S: number; waitMaxS: number; overBound: number; refusedOnce: number };
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
    ...(run.maxWaitMs !== undefined ? { maxWaitMs: run.maxWaitMs } : {}),
  };
  return {
    nodes: run.nodes,
    policy: policy === "oracle" ? ORACLE_POLICY : policy,
    commMs: run.commMs,
    jitterMs: jitterFor(run.commMs),
    pollMs: 500,
    profile: DEFAULT_PROFILE,
    seed,
    // Admission runs report each admitted request's wait: their records are kept.
    keepRecords: run.maxWaitMs !== undefined,
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
    ...(run.maxWaitMs !== undefined ? { admitted: admittedWaits(r.records, run.maxWaitMs) } : {}),
    wallMs: r.wallMs,
  };
}

/** Answered requests' waits from admission to their run, against the admission bound. */
function admittedWaits(
  records: readonly SimRecord[],
  boundMs: number,
): NonNullable<CompareResult["admitted"]> {
  const waits = records
    .filter((x) => x.served >= 0)
    // To the start of its run: the answer's way back from the peer that ran it comes after.
    .map((x) => x.queueMs + x.networkMs - (x.answerLegMs ?? 0))
    .sort((a, b) => a - b);
  const refusedOnce = records.filter((x) => x.retries > 0).length;
  if (waits.length === 0) return { waitP99S: 0, waitMaxS: 0, overBound: 0, refusedOnce };
  const p99 = waits[Math.min(waits.length - 1, Math.floor(0.99 * waits.length))] as number;
  return {
    waitP99S: p99 / 1000,
    waitMaxS: (waits[waits.length - 1] as number) / 1000,
    overBound: waits.filter((w) => w > boundMs).length,
    refusedOnce,
  };
}
