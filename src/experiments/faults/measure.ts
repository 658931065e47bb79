/**
 * What one fault run measured, as the report needs it (from the simulator's records and totals):
 * requests lost, answered twice or wrongly, latency beside the fault-free run, fallbacks, the time to
 * converge after the fault ends, and what each class's target reads (demotions, quarantine, the
 * requests that met the unbounded one).
 */
import type { TrustView } from "../../core/node/types.js";
import type { SimRecord, SimResult } from "../../sim/types.js";
import { BAD_PEER, type ClassSetup } from "./classes.js";

export type Loop = "closed" | "open";

/** What one origin's peer trust thinks of the misbehaving peer at the end. */
export interface TrustOfBadPeer extends TrustView {
  origin: number;
  /** Failures counted before its breaker first opened: failures − (opened − 1) failed half-open probes. */
  beforeFirstOpen: number;
}

export interface FaultRunResult {
  id: string;
  classId: string;
  loop: Loop;
  nodes: number;
  requests: number;
  answered: number;
  /** Requests never answered (an error after the client's retries, or no answer at all). */
  lost: number;
  /** Client requests answered more than once. */
  duplicated: number;
  /** Answers delivered to clients that are not the model's output. */
  wrong: number;
  meanS: number;
  p50S: number;
  p99S: number;
  maxS: number;
  /** Longest engine run (prefill + decode) of any request, s: "one local run". */
  maxRunS: number;
  /**
   * Longest latency less all its queue waits, s (what the network and fallbacks added to a run): the
   * answering run's (`queueMs`) and the others (`otherQueueMs`: at peers it gave up on, at its origin
   * before offload moved it).
   */
  maxUnqueuedS: number;
  /**
   * The same figures over the requests after the warm-up (from no. WARMUP_SHARE × requests): an open
   * loop starts with every cache empty, and its cold start, not the fault, can set the whole run's tail.
   */
  afterWarmup?: { from: number; p99S: number; maxS: number };
  /** Forward attempts that fell back to another candidate (the nodes' counter). */
  fallbacks: number;
  /** Client requests that fell back at least once. */
  fellBack: number;
  /** Client re-submissions (its node crashed, or it got an error). */
  retries: number;
  /** Engine runs beyond the first per request (work done twice). */
  duplicateRuns: number;
  /** Engine time of every run, s (an aborted one's until its abort): the work done. */
  engineBusyS?: number;
  /** Runs aborted because nobody took their answer (abort-runs.ts), by reason. */
  aborted?: { clientGone: number; hedged: number; cancelled: number };
  ackTimeouts: number;
  overdueAnswers: number;
  /** Forward attempts that waited out the whole forward timeout. */
  forwardTimeouts: number;
  spotChecks: number;
  spotCheckMismatches: number;
  /** Virtual time of the last answer, s, and answers per second over it. */
  spanS: number;
  throughput: number;
  faultStartS: number;
  /** When the fault ends; undefined: it lasts the whole run. */
  faultEndS?: number;
  /**
   * From the fault's end until the end of the last request started after it that still fell back,
   * was re-submitted or took longer than any request of the fault-free run (0: none did);
   * undefined when the fault never ends.
   */
  convergeS?: number;
  /** The slowest request, taken apart. */
  slowest?: Slowest;
  /** Per entry node: the requests its clients sent, their p99, the share it served itself, their mean queue wait. */
  byEntry: { entry: number; requests: number; p99S: number; servedThere: number; meanQueueS: number }[];
  trust?: TrustOfBadPeer[];
  /** Forwards to the misbehaving peer that failed over: how long the origin waited before moving on. */
  failover?: {
    count: number;
    medianS: number;
    maxS: number;
    firstByOrigin: { origin: number; sentS: number[]; waitedS: number[] }[];
  };
  liar?: LiarMeasure;
  refusal?: RefusalMeasure;
  unbounded?: UnboundedMeasure;
  wallMs: number;
}

export interface Slowest {
  index: number;
  entry: number;
  target: number;
  served: number;
  latencyS: number;
  queueS: number;
  networkS: number;
  /** Of `networkS`, its queue waits but the answering run's (SimRecord `otherQueueMs`). */
  otherQueueS?: number;
  runS: number;
  fallbacks: number;
}

export interface LiarMeasure {
  /** Forwards from other origins the liar served (every one a wrong answer while it lies). */
  servedForOthers: number;
  /** Position (1-based, by answer time) of the last wrong answer it served another origin. */
  lastWrongAt: number;
  /** Origins whose trust holds it quarantined at the end, of all other nodes. */
  quarantinedBy: number;
  origins: number;
}

export interface RefusalMeasure {
  /** Per origin, once it saw its third refused forward (trustFailures opens the breaker): requests, fell back. */
  afterDemotion: number;
  afterDemotionFellBack: number;
}

export interface UnboundedMeasure {
  index: number;
  entry: number;
  /** Its own latency and its run's window (start to answer), s. */
  latencyS: number;
  startS: number;
  endS: number;
  /** Other requests entering its node while it ran: count and p99 (s). */
  window: { requests: number; p99S: number };
  /** The same window's requests of the same node in the fault-free run (same schedule). */
  faultFreeWindow?: { requests: number; p99S: number };
  /** Every other request entering its node, whole run: p99 (s). */
  nodeP99S: number;
}

/** The share of a run's requests (by arrival) counted as its warm-up in `afterWarmup`. */
export const WARMUP_SHARE = 0.1;

function afterWarmup(records: readonly SimRecord[]): NonNullable<FaultRunResult["afterWarmup"]> {
  const from = Math.floor(WARMUP_SHARE * records.length);
  const lat = Float64Array.from(
    records.filter((x) => x.index >= from),
    (x) => x.latencyMs,
  ).sort();
  return { from, p99S: quantile(lat, 0.99) / 1000, maxS: (lat.at(-1) ?? 0) / 1000 };
}

export function quantile(sorted: ArrayLike<number>, p: number): number {
  return sorted.length === 0
    ? 0
    : (sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] as number);
}

function p99Of(records: readonly SimRecord[]): number {
  return quantile(Float64Array.from(records, (r) => r.latencyMs).sort(), 0.99) / 1000;
}

export function measureRun(
  id: { classId: string; loop: Loop },
  setup: ClassSetup,
  r: SimResult,
  faultFree: SimResult | undefined,
): FaultRunResult {
  const t = r.totals;
  const recs = r.records;
  const lat = Float64Array.from(recs, (x) => x.latencyMs).sort();
  let span = 0;
  let fellBack = 0;
  let maxRun = 0;
  let maxUnqueued = 0;
  for (const x of recs) {
    span = Math.max(span, x.endMs);
    maxRun = Math.max(maxRun, x.prefillMs + x.decodeMs);
    maxUnqueued = Math.max(maxUnqueued, x.latencyMs - x.queueMs - (x.otherQueueMs ?? 0));
    if (x.fallbacks > 0) fellBack++;
  }
  const out: FaultRunResult = {
    id: `${id.classId}-${id.loop}`,
    ...id,
    nodes: r.config.nodes,
    requests: t.requests,
    answered: t.answered,
    lost: t.requests - t.answered,
    duplicated: t.duplicateReplies,
    wrong: t.incorrect,
    meanS: t.meanLatencyMs / 1000,
    p50S: quantile(lat, 0.5) / 1000,
    p99S: quantile(lat, 0.99) / 1000,
    maxS: (lat.at(-1) ?? 0) / 1000,
    maxRunS: maxRun / 1000,
    maxUnqueuedS: maxUnqueued / 1000,
    afterWarmup: afterWarmup(recs),
    fallbacks: t.fallbacks,
    fellBack,
    retries: t.retries,
    duplicateRuns: t.duplicateRuns,
    engineBusyS: t.engineBusyMs / 1000,
    aborted: { clientGone: t.abortedClientGone, hedged: t.abortedHedged, cancelled: t.abortedCancelled },
    ackTimeouts: t.ackTimeouts,
    overdueAnswers: t.overdueAnswers,
    forwardTimeouts: t.forwardTimeouts,
    spotChecks: t.spotChecks,
    spotCheckMismatches: t.spotCheckMismatches,
    spanS: span / 1000,
    throughput: span === 0 ? 0 : t.answered / (span / 1000),
    faultStartS: setup.startMs / 1000,
    byEntry: byEntry(r),
    wallMs: r.wallMs,
  };
  const worst = recs.reduce<SimRecord | undefined>(
    (a, x) => (a === undefined || x.latencyMs > a.latencyMs ? x : a),
    undefined,
  );
  if (worst)
    out.slowest = {
      index: worst.index,
      entry: worst.entry,
      target: worst.target,
      served: worst.served,
      latencyS: worst.latencyMs / 1000,
      queueS: worst.queueMs / 1000,
      networkS: worst.networkMs / 1000,
      otherQueueS: (worst.otherQueueMs ?? 0) / 1000,
      runS: (worst.prefillMs + worst.decodeMs) / 1000,
      fallbacks: worst.fallbacks,
    };
  if (setup.unbounded !== undefined) out.unbounded = unbounded(r, setup.unbounded, faultFree);
  // An unbounded request's fault is its own run: from its submission to its answer.
  const startMs = out.unbounded ? out.unbounded.startS * 1000 : setup.startMs;
  const endMs = out.unbounded ? out.unbounded.endS * 1000 : setup.endMs;
  out.faultStartS = startMs / 1000;
  if (endMs !== undefined && endMs > 0) {
    out.faultEndS = endMs / 1000;
    let normalMax = faultFree ? 0 : Number.POSITIVE_INFINITY;
    for (const x of faultFree?.records ?? []) normalMax = Math.max(normalMax, x.latencyMs);
    let last = endMs;
    for (const x of recs) {
      if (x.startMs < endMs) continue;
      if (x.fallbacks > 0 || x.retries > 0 || x.latencyMs > normalMax) last = Math.max(last, x.endMs);
    }
    out.convergeS = (last - endMs) / 1000;
  }
  const bad = r.config.faults?.node;
  if (bad?.stalls || bad?.refuses || bad?.lies) {
    out.trust = trustOfBadPeer(r);
    out.failover = failover(recs);
  }
  if (bad?.lies) out.liar = liar(r, out.trust ?? []);
  if (bad?.refuses) out.refusal = refusal(recs);
  return out;
}

function trustOfBadPeer(r: SimResult): TrustOfBadPeer[] {
  const out: TrustOfBadPeer[] = [];
  r.perNode.forEach((n, origin) => {
    const v = n.trust?.[`n${BAD_PEER}`];
    if (origin === BAD_PEER || v === undefined) return;
    out.push({ origin, ...v, beforeFirstOpen: v.opened === 0 ? v.failures : v.failures - (v.opened - 1) });
  });
  return out;
}

function liar(r: SimResult, trust: readonly TrustOfBadPeer[]): LiarMeasure {
  const served = r.records
    .filter((x) => x.served === BAD_PEER && x.origin !== BAD_PEER)
    .sort((a, b) => a.endMs - b.endMs);
  return {
    servedForOthers: served.length,
    lastWrongAt: served.findLastIndex((x) => !x.correct) + 1,
    quarantinedBy: trust.filter((v) => v.state === "quarantined").length,
    origins: r.config.nodes - 1,
  };
}

function refusal(recs: readonly SimRecord[]): RefusalMeasure {
  const byOrigin = new Map<number, SimRecord[]>();
  for (const x of recs) {
    const list = byOrigin.get(x.origin);
    if (list) list.push(x);
    else byOrigin.set(x.origin, [x]);
  }
  let after = 0;
  let afterFellBack = 0;
  for (const [origin, list] of byOrigin) {
    if (origin === BAD_PEER) continue;
    list.sort((a, b) => a.startMs - b.startMs);
    const refused = list.filter((x) => x.fallbacks > 0 && x.target === BAD_PEER);
    // Its breaker opens at the third failure (trustFailures): count what starts after that answer.
    const demotedAt = refused[2]?.endMs;
    if (demotedAt === undefined) continue;
    for (const x of list) {
      if (x.startMs <= demotedAt) continue;
      after++;
      if (x.fallbacks > 0) afterFellBack++;
    }
  }
  return { afterDemotion: after, afterDemotionFellBack: afterFellBack };
}

function unbounded(r: SimResult, index: number, faultFree: SimResult | undefined): UnboundedMeasure {
  const me = r.records.find((x) => x.index === index);
  if (me === undefined) throw new Error(`the unbounded request ${index} has no record`);
  const entry = me.entry;
  const others = (rs: readonly SimRecord[]) => rs.filter((x) => x.entry === entry && x.index !== index);
  const inWindow = (rs: readonly SimRecord[]) =>
    others(rs).filter((x) => x.startMs >= me.startMs && x.startMs < me.endMs);
  const win = inWindow(r.records);
  const out: UnboundedMeasure = {
    index,
    entry,
    latencyS: me.latencyMs / 1000,
    startS: me.startMs / 1000,
    endS: me.endMs / 1000,
    window: { requests: win.length, p99S: p99Of(win) },
    nodeP99S: p99Of(others(r.records)),
  };
  if (faultFree) {
    const ff = inWindow(faultFree.records);
    out.faultFreeWindow = { requests: ff.length, p99S: p99Of(ff) };
  }
  return out;
}

function byEntry(r: SimResult): FaultRunResult["byEntry"] {
  return Array.from({ length: r.config.nodes }, (_, entry) => {
    const mine = r.records.filter((x) => x.entry === entry);
    const queue = mine.reduce((a, x) => a + x.queueMs, 0);
    return {
      entry,
      requests: mine.length,
      p99S: p99Of(mine),
      servedThere: mine.length === 0 ? 0 : mine.filter((x) => x.served === entry).length / mine.length,
      meanQueueS: mine.length === 0 ? 0 : queue / mine.length / 1000,
    };
  });
}

function failover(recs: readonly SimRecord[]): NonNullable<FaultRunResult["failover"]> {
  const failed = recs.filter((x) => x.target === BAD_PEER && x.origin !== BAD_PEER && x.fallbacks > 0);
  const waits = Float64Array.from(failed, (x) => x.networkMs).sort();
  const firstByOrigin: NonNullable<FaultRunResult["failover"]>["firstByOrigin"] = [];
  for (const origin of new Set(failed.map((x) => x.origin))) {
    const first = failed
      .filter((x) => x.origin === origin)
      .sort((a, b) => a.startMs - b.startMs)
      .slice(0, 3);
    firstByOrigin.push({
      origin,
      sentS: first.map((x) => x.startMs / 1000),
      waitedS: first.map((x) => x.networkMs / 1000),
    });
  }
  firstByOrigin.sort((a, b) => a.origin - b.origin);
  return {
    count: failed.length,
    medianS: quantile(waits, 0.5) / 1000,
    maxS: (waits.at(-1) ?? 0) / 1000,
    firstByOrigin,
  };
}
