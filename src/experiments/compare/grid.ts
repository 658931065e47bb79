/**
 * The comparison grid of `prefixmesh experiment compare` (issue 17): every policy, the centralized
 * baseline and the oracle on the same seeds, over slices of the space — a full cross product of
 * loads × Δcomm × sizes × heterogeneity × memory would be thousands of runs, so each slice varies
 * the axes its question needs and holds the rest at the paper's setup (4 nodes, Δcomm 2 ms).
 */
import type { PolicyName } from "../../core/node/policies/index.js";

/**
 * The policies compared, in report order; `oracle` = cost-aware with perfect estimates (the bound).
 * `cost-aware-daemon` = cost-aware with the daemon's node defaults (DAEMON_NODE_DEFAULTS: offload,
 * advertised costs, start-up calibration…), as `prefixmesh node` runs it; the other rows run the
 * core schema's defaults (the paper's node).
 */
export const COMPARED = [
  "local",
  "random",
  "round-robin",
  "least-loaded",
  "affinity",
  "cost-aware",
  "cost-aware-daemon",
  "centralized",
  "oracle",
] as const;
export type ComparedPolicy = (typeof COMPARED)[number];

/** The row that runs cost-aware as the daemon configures it (the simulator's `daemonConfig`). */
export const DAEMON_ROW = "cost-aware-daemon" satisfies ComparedPolicy;

/** The policy the oracle row runs with perfect estimates. */
export const ORACLE_POLICY: PolicyName = "cost-aware";

export const COMM_MS = [2, 20, 200, 1000] as const;
/** Open-loop offered load, as a fraction of capacity (capacity.ts says how it is measured). */
export const LOADS = [0.5, 0.8, 0.95, 1.2] as const;
/** Engine slowdown of the heterogeneous clusters' slow node (node 0). */
export const SLOW_FACTOR = 3;
/**
 * Admission by expected wait (`maxWaitMs`, ms) of the daemon row at 120% of capacity: the bound the
 * report holds every admitted request's wait to. Twelve or so service times: long enough that a
 * burst at 80% of capacity would not trip it, short enough to be a useful interactive bound.
 */
export const ADMISSION_WAIT_MS = 5_000;
/** Offered loads above capacity: where the daemon row runs with admission on. */
export const OVERLOAD = 1.2;
/** Zipf exponent of the open-loop workload's subject popularity. */
export const ZIPF_S = 1.1;

export type Memory = "paper" | "constrained";

export interface CompareRun {
  id: string;
  /** Which question the run answers (the report's sections). */
  slice: "closed" | "closed-16" | "closed-hetero" | "open" | "open-16" | "open-hetero";
  policy: ComparedPolicy;
  nodes: number;
  commMs: number;
  memory: Memory;
  hetero: boolean;
  /** Offered load as a fraction of capacity; undefined = closed loop (one request in flight). */
  load?: number;
  /** Admission by expected wait (node config `maxWaitMs`, ms); undefined = off (the defaults). */
  maxWaitMs?: number;
}

function run(
  slice: CompareRun["slice"],
  policy: ComparedPolicy,
  nodes: number,
  commMs: number,
  memory: Memory,
  hetero: boolean,
  load?: number,
): CompareRun {
  const parts = [slice, policy, `n${nodes}`, `c${commMs}`, memory];
  if (hetero) parts.push("het");
  if (load !== undefined) parts.push(`l${Math.round(load * 100)}`);
  // Overload: the daemon row runs as an operator would, with a wait bound (ADMISSION_WAIT_MS). Not
  // in the id: the id without the policy names the cell every policy of it shares.
  const admission = policy === DAEMON_ROW && load !== undefined && load >= OVERLOAD;
  return {
    id: parts.join("-"),
    slice,
    policy,
    nodes,
    commMs,
    memory,
    hetero,
    ...(load !== undefined ? { load } : {}),
    ...(admission ? { maxWaitMs: ADMISSION_WAIT_MS } : {}),
  };
}

/** Closed-loop slices (they also give the service time open-loop capacity is measured from). */
export function closedGrid(): CompareRun[] {
  const out: CompareRun[] = [];
  for (const memory of ["paper", "constrained"] as const)
    for (const c of COMM_MS) for (const p of COMPARED) out.push(run("closed", p, 4, c, memory, false));
  for (const c of [2, 200]) for (const p of COMPARED) out.push(run("closed-16", p, 16, c, "paper", false));
  for (const c of [2, 200]) for (const p of COMPARED) out.push(run("closed-hetero", p, 4, c, "paper", true));
  return out;
}

/** Open-loop slices: p99 against load at 4 nodes, and the 16-node and heterogeneous clusters. */
export function openGrid(): CompareRun[] {
  const out: CompareRun[] = [];
  for (const l of LOADS) for (const p of COMPARED) out.push(run("open", p, 4, 2, "paper", false, l));
  for (const l of [0.8, OVERLOAD])
    for (const p of COMPARED) out.push(run("open-16", p, 16, 2, "paper", false, l));
  for (const l of [0.8]) for (const p of COMPARED) out.push(run("open-hetero", p, 4, 2, "paper", true, l));
  return out;
}
