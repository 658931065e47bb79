/**
 * One node-simulator run of the scale grid: N PrefixNodes (the daemon's core) on MMLU open loop, one
 * node crashed half-way, observed by ScaleProbe. Kept as the compact summary the report needs.
 */
import { DEFAULT_PROFILE } from "../../engines/sim/profiles.js";
import {
  bucketRange,
  bytesBetween,
  isGossipKind as isGossip,
  isMembershipKind as isMembership,
} from "../../sim/bytes-by-time.js";
import { sumMeshParts } from "../../sim/mesh-parts.js";
import { runSimulation } from "../../sim/run.js";
import type { SimConfig, SimRecord } from "../../sim/types.js";
import { hitRate, idealHits } from "../../workload/ideal-hit.js";
import type { Workload } from "../../workload/types.js";
import { COMM_MS, type GossipMode, JITTER_MS, POLICY, POLL_MS } from "./grid.js";
import { liveHeapBytes } from "./heap.js";
import { type Detection, ScaleProbe, type Spread } from "./probe.js";

export type CellKind = "main" | "oracle" | "loss" | "bounded";

export interface NodeCell {
  kind: CellKind;
  mode: GossipMode;
  nodes: number;
  loss: number;
  maxEstimates?: number;
  requests: number;
  answered: number;
  virtualS: number;
  /** Anti-entropy + membership traffic per node per simulated second (bytes, messages). */
  gossipBytesPerNodeS: number;
  gossipMsgsPerNodeS: number;
  /** Membership/liveness only: heartbeats (full) or SWIM (scuttlebutt). */
  membershipBytesPerNodeS: number;
  membershipMsgsPerNodeS: number;
  /** Process CPU (user + system) of the run ÷ N ÷ simulated seconds, ms. */
  cpuMsPerNodeS: number;
  /** (Live heap at full load − live heap before the run) ÷ N, bytes. */
  heapPerNodeBytes?: number;
  hit: number;
  ideal: number;
  meanS: number;
  p99S: number;
  spreads: Spread[];
  detection?: Detection;
  /** Sampled (observer, member) episodes of a live member seen suspected or down. */
  falseSuspicions: number;
  /** Virtual ms until every live node could route to every other (live and estimated); undefined: never. */
  formedAtMs?: number;
  /** The same for 99% of those pairs. */
  formed99AtMs?: number;
  /** Prompt and hit tokens of the answered requests by arrival, in buckets of `bucketMs` (hit rate vs time). */
  hitByArrival: HitByArrival;
  /** With `meshParts`: SWIM and Scuttlebutt bytes by part over the run (all nodes). */
  meshParts?: Record<string, { count: number; bytes: number }>;
  /** With `meshParts`: the same from `steady.fromMs` to `steady.toMs`. */
  meshPartsSteady?: Record<string, { count: number; bytes: number }>;
  /** Virtual ms at which every live node first saw every other live node live (membership formed). */
  membersFormedAtMs?: number;
  /**
   * Gossip after formation: from membership formed to the end of the arrivals (or of the run, when
   * formation outlasts the arrivals); undefined: membership never formed.
   */
  steady?: {
    fromMs: number;
    toMs: number;
    /** The window is past the arrivals (formation outlasted them): the drain, not comparable. */
    afterArrivals: boolean;
    gossipBytesPerNodeS: number;
    membershipBytesPerNodeS: number;
  };
  wallMs: number;
  /** Process CPU (user + system) of the run, ms: what the grid's budget counts. */
  cpuMs: number;
}

/** Width of a `hitByArrival` bucket, virtual ms. */
export const HIT_BUCKET_MS = 250;

export interface HitByArrival {
  bucketMs: number;
  /** Bucket i holds the requests that arrived in [i, i + 1) × bucketMs. */
  prompt: number[];
  hit: number[];
}

/** The answered requests' tokens by arrival bucket. */
export function hitByArrival(records: readonly SimRecord[], bucketMs = HIT_BUCKET_MS): HitByArrival {
  const out: HitByArrival = { bucketMs, prompt: [], hit: [] };
  for (const r of records) {
    if (!r.ok) continue;
    const i = Math.max(0, Math.floor(r.startMs / bucketMs));
    while (out.prompt.length <= i) {
      out.prompt.push(0);
      out.hit.push(0);
    }
    out.prompt[i] = (out.prompt[i] as number) + r.promptTokens;
    out.hit[i] = (out.hit[i] as number) + r.actualHitTokens;
  }
  return out;
}

/** Hit rate of the requests that arrived at or after `fromMs` (whole buckets; undefined: none). */
export function hitFrom(h: HitByArrival, fromMs: number): number | undefined {
  let prompt = 0;
  let hit = 0;
  for (let i = Math.ceil(fromMs / h.bucketMs); i < h.prompt.length; i++) {
    prompt += h.prompt[i] as number;
    hit += h.hit[i] as number;
  }
  return prompt > 0 ? hit / prompt : undefined;
}

const idealCache = new WeakMap<Workload, number>();

export interface CellSpec {
  kind: CellKind;
  mode: GossipMode;
  nodes: number;
  loss: number;
  maxEstimates?: number;
  seed: number;
  arrivalS: number;
  /** Also count the mesh bytes by part (sim/mesh-parts.ts). */
  meshParts?: boolean;
}

export function simConfigOf(c: CellSpec): SimConfig {
  const crashAt = Math.round((c.arrivalS * 1000) / 2);
  return {
    nodes: c.nodes,
    policy: POLICY,
    commMs: COMM_MS,
    jitterMs: JITTER_MS,
    pollMs: POLL_MS,
    profile: DEFAULT_PROFILE,
    seed: c.seed,
    // Kept for the hit rate by arrival (a few hundred bytes per request).
    keepRecords: true,
    gossip: c.mode,
    settleMs: 3 * POLL_MS,
    ...(c.maxEstimates === undefined ? {} : { maxEstimates: c.maxEstimates }),
    ...(c.kind === "oracle" ? { oracle: true } : {}),
    ...(c.meshParts ? { meshParts: true } : {}),
    faults: {
      ...(c.loss > 0 ? { network: { lossProb: c.loss } } : {}),
      // The last node crashes half-way (not a seed: scuttlebutt joins through n0 and n1).
      ...(c.nodes >= 4 ? { node: { crashes: [{ node: c.nodes - 1, atMs: crashAt }] } } : {}),
    },
  };
}

export function executeCell(c: CellSpec, workload: Workload): NodeCell {
  const config = simConfigOf(c);
  const crash = config.faults?.node?.crashes?.[0];
  const arrivalMs = c.arrivalS * 1000;
  const probe = new ScaleProbe({
    ids: Array.from({ length: c.nodes }, (_, i) => `n${i}`),
    everyMs: 20,
    firstChangeMs: Math.min(2_000, arrivalMs / 4),
    changeEveryMs: Math.max(250, arrivalMs / 8),
    changes: 5,
    windowMs: 10_000,
    ...(crash ? { crash: { node: crash.node, atMs: crash.atMs } } : {}),
    suspicionEveryMs: POLL_MS,
    heapAtMs: arrivalMs * 0.9,
    ...(c.maxEstimates === undefined ? {} : { holdersOnly: true }),
  });
  const heap0 = liveHeapBytes();
  const cpu0 = process.cpuUsage();
  const r = runSimulation(config, workload, { probe });
  const cpu = process.cpuUsage(cpu0);
  const t = r.totals;
  let ideal = idealCache.get(workload);
  if (ideal === undefined) {
    ideal = hitRate(workload.requests, idealHits(workload.requests));
    idealCache.set(workload, ideal);
  }
  let gb = 0;
  let gm = 0;
  let mb = 0;
  let mm = 0;
  for (const [kind, m] of Object.entries(t.messages)) {
    if (isGossip(kind)) {
      gb += m.bytes;
      gm += m.count;
    }
    if (isMembership(kind)) {
      mb += m.bytes;
      mm += m.count;
    }
  }
  const virtualS = r.virtualMs / 1000;
  const perNodeS = (x: number) => x / c.nodes / virtualS;
  const steady = steadyWindow(probe.membersFormedAtMs, arrivalMs, r.virtualMs, t.bytesByTime.bucketMs);
  const steadyBytes = steady && bytesBetween(t.bytesByTime, steady.fromMs, steady.toMs);
  const perNodeSteadyS = (x: number) => (steady ? (x * 1000) / c.nodes / (steady.toMs - steady.fromMs) : 0);
  return {
    kind: c.kind,
    mode: c.mode,
    nodes: c.nodes,
    loss: c.loss,
    ...(c.maxEstimates === undefined ? {} : { maxEstimates: c.maxEstimates }),
    requests: t.requests,
    answered: t.answered,
    virtualS,
    gossipBytesPerNodeS: perNodeS(gb),
    gossipMsgsPerNodeS: perNodeS(gm),
    membershipBytesPerNodeS: perNodeS(mb),
    membershipMsgsPerNodeS: perNodeS(mm),
    cpuMsPerNodeS: perNodeS((cpu.user + cpu.system) / 1000),
    ...(probe.heapBytes === undefined
      ? {}
      : { heapPerNodeBytes: Math.max(0, probe.heapBytes - heap0) / c.nodes }),
    hit: t.actualHitRate,
    ideal,
    meanS: t.meanLatencyMs / 1000,
    p99S: t.p99LatencyMs / 1000,
    spreads: probe.spreads,
    ...(probe.detection ? { detection: probe.detection } : {}),
    falseSuspicions: probe.falseSuspicions,
    ...(probe.formedAtMs === undefined ? {} : { formedAtMs: probe.formedAtMs }),
    ...(probe.formed99AtMs === undefined ? {} : { formed99AtMs: probe.formed99AtMs }),
    hitByArrival: hitByArrival(r.records),
    ...(t.meshParts ? { meshParts: t.meshParts } : {}),
    ...(t.meshPartsByTime && steady
      ? {
          meshPartsSteady: sumMeshParts(
            t.meshPartsByTime,
            ...bucketRange(t.bytesByTime.bucketMs, steady.fromMs, steady.toMs, t.meshPartsByTime.length),
          ),
        }
      : {}),
    ...(probe.membersFormedAtMs === undefined ? {} : { membersFormedAtMs: probe.membersFormedAtMs }),
    ...(steady && steadyBytes
      ? {
          steady: {
            ...steady,
            gossipBytesPerNodeS: perNodeSteadyS(steadyBytes.gossip),
            membershipBytesPerNodeS: perNodeSteadyS(steadyBytes.membership),
          },
        }
      : {}),
    wallMs: r.wallMs,
    cpuMs: (cpu.user + cpu.system) / 1000,
  };
}

/**
 * The window after formation, in whole buckets: from the bucket after membership formed to the end
 * of the arrivals, or to the end of the run when fewer than two buckets of arrivals remain.
 */
export function steadyWindow(
  formedMs: number | undefined,
  arrivalMs: number,
  endMs: number,
  bucketMs: number,
): { fromMs: number; toMs: number; afterArrivals: boolean } | undefined {
  if (formedMs === undefined) return undefined;
  const fromMs = (Math.floor(formedMs / bucketMs) + 1) * bucketMs;
  const arrivalEnd = Math.floor(arrivalMs / bucketMs) * bucketMs;
  if (arrivalEnd - fromMs >= 2 * bucketMs) return { fromMs, toMs: arrivalEnd, afterArrivals: false };
  const runEnd = Math.floor(endMs / bucketMs) * bucketMs;
  return runEnd - fromMs >= 2 * bucketMs ? { fromMs, toMs: runEnd, afterArrivals: true } : undefined;
}
