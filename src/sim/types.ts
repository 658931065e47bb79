/**
 * The simulator's public shapes: what `runSimulation` (run.ts) takes and returns. The experiments
 * (src/experiments) and `prefixmesh sim` (and its `--json` readers) code against these: add fields
 * rather than change them.
 */
import type { NodeConfigInput } from "../core/node/config.js";
import type { PolicyName } from "../core/node/policies/index.js";
import type { NodeStats, TrustView } from "../core/node/types.js";
import type { CostProfile, ProfileName } from "../engines/sim/profiles.js";
import type { BytesByTime } from "./bytes-by-time.js";
import type { ClientFaults } from "./faults/client.js";
import type { EngineFaults } from "./faults/engine.js";
import type { NetworkFaults } from "./faults/network.js";
import type { NodeFaults } from "./faults/node.js";
import type { SimProbe } from "./probe.js";

export type { ClientFaults, SimUnbounded } from "./faults/client.js";
export type { EngineFaults, SimSlowdown } from "./faults/engine.js";
export type { NetworkFaults, SimPartition } from "./faults/network.js";
export type { NodeFaults, SimCrash, SimMisbehaviour, SimPause } from "./faults/node.js";

/**
 * Faults injected into a run, by the component they hit (src/sim/faults/: one file per component
 * holds its classes' shape, seeded draw, flags, checks and run-time model). Times are virtual ms from
 * the start. Adding a fault class: its component file, and its `prefixmesh sim` flag.
 */
export interface SimFaults {
  network?: NetworkFaults;
  engine?: EngineFaults;
  node?: NodeFaults;
  client?: ClientFaults;
}

export interface SimConfig {
  /** Number of nodes (node ids "n0" … "n{N-1}"). */
  nodes: number;
  /** Count SWIM and Scuttlebutt bytes by part as delivered (totals.meshParts; a measurement). */
  meshParts?: boolean;
  policy: PolicyName;
  /** Δcomm: fixed one-way delay per message, ms. */
  commMs: number;
  /** Uniform jitter added to Δcomm, in [-jitterMs, +jitterMs] (delay never below 0). */
  jitterMs: number;
  /** Δpoll: anti-entropy period, ms. */
  pollMs: number;
  /** Cost profile name or an explicit profile. */
  profile: ProfileName | CostProfile;
  /** KV capacity per node in tokens; default: the profile's. */
  capacityTokens?: number;
  seed: number;
  faults?: SimFaults;
  /**
   * Run the nodes as the daemon configures them (DAEMON_NODE_DEFAULTS in src/core/node/config.ts:
   * answer probes off, the daemon's ack floor…) instead of the core schema's defaults. `policy`,
   * `pollMs` and `node` still apply on top, as the daemon's own flags would.
   */
  daemonConfig?: boolean;
  /**
   * Each node runs the daemon's start-up calibration when it boots (calibration.ts), as
   * `prefixmesh node` does by default: its cost fit starts from its own engine, slowdown included.
   * Default: on with `daemonConfig`, else off (the paper's nodes start from the prior).
   */
  calibrate?: boolean;
  /** Every client request's deadline, ms from its (re-)submission (`x-prefixmesh-deadline-ms`). */
  deadlineMs?: number;
  /** Extra node settings (forward timeout, push-back, concurrency, k…). */
  node?: Partial<Omit<NodeConfigInput, "id" | "peers" | "policy" | "capacityTokens" | "pollMs">>;
  /** Check invariants after every engine step and at the end (slower; tests). */
  checkInvariants?: boolean;
  /** After the last request, keep simulating this long (anti-entropy settles; convergence checks). */
  settleMs?: number;
  /** Safety stop in virtual ms; default 10^10. */
  maxVirtualMs?: number;
  /** Keep per-request records in the result (default true; off saves memory in huge runs). */
  keepRecords?: boolean;
  /**
   * SIMULATION-ONLY reference, not a deployable policy (oracle.ts): every estimate is refreshed to
   * its owner's true tree, queue depth and push-back the instant they change, free of charge.
   * Always on for the `centralized` baseline (its global view).
   */
  oracle?: boolean;
  /**
   * With the oracle: check every pair after every event, no shortcut (oracle.ts) — the slow naive
   * reference tests hold the oracle's shortcuts to.
   */
  oracleExhaustive?: boolean;
  /**
   * With the oracle: every node keeps its own `PeerIndex` instead of key sets shared across nodes
   * (shared-estimates.ts) — the reference tests hold the sharing to.
   */
  oracleOwnIndexes?: boolean;
  /**
   * The mesh protocol (NodeConfig.gossip): "full" (default, the paper's) or "scuttlebutt" (SWIM
   * membership joined through two seeds + Scuttlebutt digest anti-entropy).
   */
  gossip?: "full" | "scuttlebutt";
  /** gossip "scuttlebutt": estimates each node keeps at most (NodeConfig.maxEstimates). */
  maxEstimates?: number;
}

export interface SimRecord {
  /** Index in the workload. */
  index: number;
  id: string;
  group: string;
  /** Node index the schedule assigned. */
  entry: number;
  /** Node index that actually took the request (differs only if the entry node was down). */
  origin: number;
  /** The policy's first choice (node index). */
  target: number;
  /** Node index that served it; -1 if it failed. */
  served: number;
  startMs: number;
  endMs: number;
  latencyMs: number;
  promptTokens: number;
  predictedHitTokens: number;
  actualHitTokens: number;
  hops: number;
  fallbacks: number;
  queueMs: number;
  prefillMs: number;
  decodeMs: number;
  networkMs: number;
  /**
   * Of `networkMs`, the answer's way back from the peer that ran it (0 when its origin ran it): not
   * part of the wait before its run.
   */
  answerLegMs?: number;
  /**
   * Of `networkMs`, its queue waits other than `queueMs` (queue-waits.ts): at peers whose answer it
   * did not get, while its origin still waited on that attempt, and in its origin's queue before
   * offload moved it or a peer's answer took it out. Queueing, not the network's.
   */
  otherQueueMs?: number;
  /** Client re-submissions because its origin crashed. */
  retries: number;
  ok: boolean;
  /** The output equals the deterministic expected output. */
  correct: boolean;
}

export interface MessageTotals {
  count: number;
  /** Bytes the codec would send (snapshots: `encodedSize`; others: documented estimate). */
  bytes: number;
}

/**
 * Node counters the run's totals add up over the nodes alive at the end, under their NodeStats names
 * and meanings.
 */
export const SUMMED_STATS = [
  "lateReplies",
  "fallbacks",
  "cancelledForwards",
  "rejectedDeadline",
  "ackTimeouts",
  "probes",
  "resends",
  "resentAnswers",
  "hedgedAnswers",
  "abortedClientGone",
  "abortedHedged",
  "abortedCancelled",
  "overdueAnswers",
  "forwardTimeouts",
  "expiredForwards",
  "offloaded",
  "spotChecks",
  "spotCheckMismatches",
] as const satisfies readonly (keyof NodeStats)[];
export type SummedStat = (typeof SUMMED_STATS)[number];

export interface SimTotals extends Pick<NodeStats, SummedStat> {
  requests: number;
  answered: number;
  failed: number;
  incorrect: number;
  /** Client requests answered more than once (must be 0). */
  duplicateReplies: number;
  /**
   * Latency over every finished request, failed ones included (their time to failing); `prefixmesh
   * sim` prints these three. pN = the sorted latencies' entry at index ⌊N/100 × count⌋ (capped).
   */
  meanLatencyMs: number;
  p50LatencyMs: number;
  p99LatencyMs: number;
  /** Σ predicted hit tokens / Σ prompt tokens (the paper's "expected hit"). */
  expectedHitRate: number;
  /** Σ actual hit tokens / Σ prompt tokens. */
  actualHitRate: number;
  /** Share of requests served by the busiest node. */
  hotspotShare: number;
  hotspotNode: number;
  /** Share of requests served by a node other than their origin. */
  forwardedShare: number;
  /** By kind: snapshot-full, snapshot-delta, heartbeat, forward, forward-ack, result, error, cancel, goodbye. */
  messages: Record<string, MessageTotals>;
  /** With `meshParts`: SWIM and Scuttlebutt bytes by part, as delivered (mesh-parts.ts). */
  meshParts?: Record<string, MessageTotals>;
  /** With `meshParts`: the same by delivery time, bucket i = [i, i + 1) × BYTES_BUCKET_MS. */
  meshPartsByTime?: Record<string, MessageTotals>[];
  /** Gossip and membership bytes by send time (bytes-by-time.ts). */
  bytesByTime: BytesByTime;
  messagesTotal: number;
  bytesTotal: number;
  /** Engine runs started (any node, any attempt; a crash may cut one short). */
  engineRuns: number;
  /** Engine time (ms) of the runs that ended (an aborted run's until its abort): the work done. */
  engineBusyMs: number;
  /** Engine runs beyond the first per workload request: work computed twice (e.g. after a fallback). */
  duplicateRuns: number;
  evictedTokens: number;
  retries: number;
  /** Requests whose client hung up before the answer (`faults.client.abandon`); absent when none. */
  abandoned?: number;
}

export interface SimNodeSummary {
  id: string;
  /** Requests the schedule sent to it. */
  entered: number;
  /** Requests it ran on its engine (for any origin). */
  served: number;
  servedForPeers: number;
  forwarded: number;
  evictedTokens: number;
  treeTokens: number;
  crashes: number;
  /**
   * What its peer-trust role thinks of each peer at the end (peer id → breaker state, failures,
   * times opened); absent when the node is down at the end.
   */
  trust?: Record<string, TrustView>;
}

export interface SimResult {
  config: SimConfig;
  profile: CostProfile;
  capacityTokens: number;
  workload: { name: string; synthetic: boolean; requests: number };
  records: SimRecord[];
  totals: SimTotals;
  perNode: SimNodeSummary[];
  /** Virtual time at the end, ms. */
  virtualMs: number;
  wallMs: number;
  events: number;
  /** Empty unless `checkInvariants` found a problem (tests assert it stays empty). */
  invariantViolations: string[];
  /**
   * Scheduled faults (`faults`, as `prefixmesh sim` flags) that would have begun only after the run's
   * stop, which comes once the last request was answered (at `afterMs`, virtual) and the faults begun
   * by then are over (faults/unbegun.ts): the run stopped without them. Absent when all began.
   */
  faultsNeverBegun?: { afterMs: number; faults: string[] };
}

export interface SimProgress {
  onProgress?(done: number, total: number): void;
  /** Read-only observation every `probe.everyMs` (probe.ts); changes no node's behaviour. */
  probe?: SimProbe;
}
