/**
 * The scale experiment's fixed setting (issue 14): N nodes in both gossip modes, MMLU open loop at
 * RATE_PER_NODE requests/s per node, Δcomm 2 ms, cost-aware, Δpoll 500 ms (the paper's).
 */
import type { WorkloadSource } from "../workloads.js";

export const SCALE_NODES = [4, 16, 64, 256, 1024] as const;
export const MODES = ["full", "scuttlebutt"] as const;
export type GossipMode = (typeof MODES)[number];

export const RATE_PER_NODE = 2;
export const COMM_MS = 2;
export const JITTER_MS = 0.5;
export const POLL_MS = 500;
export const POLICY = "cost-aware" as const;
/** The message loss under which false suspicions are counted (besides none). */
export const LOSS = 0.05;
/** `--max-estimates` of the bounded-memory cell (the target at 1,024 nodes). */
export const BOUNDED_ESTIMATES = 64;

export interface ScaleOptions {
  source: WorkloadSource;
  seed: number;
  /** Largest N tried (the grid is SCALE_NODES up to it). */
  maxNodes: number;
  /** Seconds of open-loop arrivals per node-simulator run (at least; see minRequests). */
  arrivalS: number;
  /**
   * Requests per node-simulator run at least: small N get a longer arrival window, so a hit rate at
   * 4 nodes is not read off a few dozen requests. 0 = arrivalS for every N.
   */
  minRequests?: number;
  /**
   * CPU budget per run, s (the process's user + system CPU, not wall-clock time, so a busy machine
   * starts the same runs as a quiet one): a run whose projected CPU time (from the previous N's
   * measured time and growth) exceeds it is not started, and the report says so with the projection.
   */
  budgetS: number;
  /** Heap budget per run, MB (projected the same way). */
  heapBudgetMb: number;
  /** Only these N of the grid (default: every N up to maxNodes). */
  nodes?: readonly number[];
  /** Only these series (SERIES; default all): e.g. just the oracle at one N. */
  series?: readonly SeriesKey[];
  /** The bounded series' --max-estimates (default BOUNDED_ESTIMATES, the issue's). */
  boundedEstimates?: number;
  onPhase?(phase: string): void;
}

/** The runs of the grid, per N: the node simulator's series, then the protocols alone. */
export const SERIES = [
  "main-full",
  "main-scuttlebutt",
  "oracle",
  "loss-full",
  "loss-scuttlebutt",
  "bounded-scuttlebutt",
  "swim",
  "rounds",
] as const;
export type SeriesKey = (typeof SERIES)[number];

export function nodesUpTo(max: number, only?: readonly number[]): number[] {
  return SCALE_NODES.filter((n) => n <= max && (only === undefined || only.includes(n)));
}

/** The arrival window at N: arrivalS, stretched so the run has at least minRequests requests. */
export function arrivalSAt(o: Pick<ScaleOptions, "arrivalS" | "minRequests">, nodes: number): number {
  return Math.max(o.arrivalS, (o.minRequests ?? 0) / (RATE_PER_NODE * nodes));
}
