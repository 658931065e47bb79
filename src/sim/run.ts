/**
 * The discrete-event simulator: N unchanged `PrefixNode`s (src/core/node) on a simulated network,
 * each with a simulated engine, driven by a workload in virtual time. One seeded PRNG feeds every
 * random choice (network, node jitter and tie-breaks, engine faults), so the same config + workload
 * gives the identical run.
 *
 * Snapshots travel as immutable objects (no bytes in the hot path); the bytes the codec would send
 * are counted with `encodedSize`.
 */

import type { EngineResult } from "../core/engine.js";
import { keyTokens } from "../core/namespace.js";
import { DAEMON_NODE_DEFAULTS } from "../core/node/config.js";
import { PrefixNode } from "../core/node/node.js";
import { retryAfterSec } from "../core/node/replies.js";
import {
  type Effect,
  type MeshMessage,
  type NodeInput,
  type PeerMessage,
  type Timer,
  timerKey,
} from "../core/node/types.js";
import { Prng } from "../core/prng.js";
// The answer every correct run must give: the simulated engine's deterministic output.
import { simOutput as expectedText } from "../engines/sim/cost.js";
import { resolveProfile } from "../engines/sim/profiles.js";
import { keptOnAbort, SimEngine } from "../engines/sim/sim-engine.js";
import type { Workload } from "../workload/types.js";
import { addBytesAt, BYTES_BUCKET_MS, newBytesByTime } from "./bytes-by-time.js";
import { calibrationSamples } from "./calibration.js";
import { EventQueue, type SimEvent } from "./event-queue.js";
import { checkFaults, faultsEnd as faultsEndOf } from "./fault-schedule.js";
import { ClientFaultModel } from "./faults/client.js";
import { EngineFaultModel } from "./faults/engine.js";
import { NodeFaultModel } from "./faults/node.js";
import { checkConvergence, checkTreeMirrorsEngine, EstimateWatch } from "./invariants.js";
import { addMeshParts, type MeshParts, sumMeshParts } from "./mesh-parts.js";
import { meshBytes, meshKind, messageBytes, messageKind } from "./message-size.js";
import { SimNetwork } from "./network.js";
import { Oracle, OwnerRefresh, stateOf } from "./oracle.js";
import type { SimProbe } from "./probe.js";
import { SharedKeySets, SharedPeerIndex } from "./shared-estimates.js";
import {
  type MessageTotals,
  type SimConfig,
  type SimNodeSummary,
  type SimProgress,
  type SimRecord,
  type SimResult,
  SUMMED_STATS,
  type SummedStat,
} from "./types.js";

export type { SimConfig, SimFaults, SimProgress, SimRecord, SimResult } from "./types.js";

const MAX_CLIENT_TRIES = 4;

type Ev = SimEvent &
  (
    | { k: "deliver"; to: number; inc: number; from: number; msg: PeerMessage; sentAt: number }
    | { k: "mesh"; to: number; inc: number; from: number; msg: MeshMessage }
    | { k: "verified"; node: number; inc: number; id: string; ok: boolean }
    | { k: "timer"; node: number; inc: number; timer: Timer; key: string; token: number }
    /** A run ends: as modelled, or (`abort`) at once, the node having asked (abort-runs.ts). */
    | { k: "engine"; node: number; inc: number; jobId: string; fail: boolean; abort?: true }
    | { k: "submit"; req: number }
    /** The client of a request hangs up (faults/client.ts, `abandon`). */
    | { k: "gone"; req: number }
    | { k: "crash"; node: number }
    | { k: "restart"; node: number }
    | { k: "probe" }
  );

interface SimNodeState {
  idx: number;
  id: string;
  node: PrefixNode | null;
  inc: number;
  epoch: number;
  engine: SimEngine;
  timers: Map<string, number>;
  /** Client reqIds this node owes an answer to. */
  outstanding: Set<string>;
  /** Engine runs in progress: jobId → what to cache when it ends, and when it started (aborts). */
  runs: Map<
    string,
    { tokens: Uint32Array; cacheTokens: number; result: EngineResult; startedAt: number; aborted?: true }
  >;
  summary: SimNodeSummary;
}

interface ClientReq {
  tries: number;
  startMs: number;
  origin: number;
  done: boolean;
}

export function runSimulation(config: SimConfig, workload: Workload, opts: SimProgress = {}): SimResult {
  const wallStart = performance.now();
  validate(config, workload.requests.length);
  const profile = resolveProfile(config.profile);
  const capacity = config.capacityTokens ?? profile.capacityTokens;
  const N = config.nodes;
  const faults = config.faults ?? {};
  const rng = new Prng(config.seed);
  const net = new SimNetwork(rng.fork(), config.commMs, config.jitterMs, faults.network);
  const engineFaults = new EngineFaultModel(faults.engine ?? {}, N, rng.fork());
  const nodeFaults = new NodeFaultModel(faults.node ?? {}, N);
  const clientFaults = new ClientFaultModel(faults.client ?? {});
  const ids = Array.from({ length: N }, (_, i) => `n${i}`);
  const idxOf = new Map(ids.map((id, i) => [id, i]));
  const queue = new EventQueue<Ev>();
  let now = 0;
  let events = 0;
  let timerSeq = 0;
  const delayBuf = [0, 0];
  const check = config.checkInvariants === true;
  const violations: string[] = [];
  const estimateWatch = check ? new EstimateWatch(violations) : undefined;
  const keepRecords = config.keepRecords !== false;
  // The centralized baseline IS a router with the global view: it always runs with the oracle.
  const oracle =
    config.oracle === true || config.policy === "centralized"
      ? new Oracle(N, config.oracleExhaustive === true)
      : undefined;
  const gossip = simGossip(config);
  /** Every node's settings bar its id and seeds (what `boot` gives each, and what sharing reads). */
  const settings = {
    ...(config.daemonConfig === true ? DAEMON_NODE_DEFAULTS : {}),
    // Scuttlebutt mode: nobody is told the members, only two seeds (n0, n1); SWIM does the rest.
    ...(gossip === "full" ? { gossip } : { gossip, maxPeers: N - 1, maxEstimates: config.maxEstimates }),
    ...config.node,
  };
  // Every estimate of an owner is the same under the oracle: one key set serves every node holding it.
  const keySets =
    oracle && config.oracleOwnIndexes !== true && (settings.estimateStepKeys ?? 0) === 0
      ? new SharedKeySets()
      : undefined;
  const peerIndex = keySets ? (maxOwners: number) => new SharedPeerIndex(maxOwners, keySets) : undefined;
  const calibrate = config.calibrate ?? config.daemonConfig === true;
  let oracleBusy = false;
  /** When the run stops: set once every request is answered (∞ until then). */
  let stopAt = Number.POSITIVE_INFINITY;

  const nodes: SimNodeState[] = ids.map((id, idx) => ({
    idx,
    id,
    node: null,
    inc: 0,
    epoch: -1,
    engine: new SimEngine({ profile, capacityTokens: capacity }),
    timers: new Map(),
    outstanding: new Set(),
    runs: new Map(),
    summary: {
      id,
      entered: 0,
      served: 0,
      servedForPeers: 0,
      forwarded: 0,
      evictedTokens: 0,
      treeTokens: 0,
      crashes: 0,
    },
  }));
  const nodeRngs = ids.map(() => rng.fork());

  const boot = (s: SimNodeState): void => {
    const r = nodeRngs[s.idx] as Prng;
    const epoch = Math.max(Math.floor(now), s.epoch + 1);
    s.epoch = epoch;
    s.node = new PrefixNode(
      {
        ...settings,
        id: s.id,
        peers: gossip === "full" ? ids.filter((x) => x !== s.id) : ids.slice(0, 2).filter((x) => x !== s.id),
        policy: config.policy,
        capacityTokens: capacity,
        pollMs: config.pollMs,
        cacheMode: "node-managed",
        // The simulated engine is abortable, as the daemon's (it keeps what its prefill got through).
        abortRuns: settings.abortRuns ?? true,
      },
      { now: () => now, random: () => r.next(), ...(peerIndex ? { peerIndex } : {}) },
      // Invariant runs also check what costs more than O(1) inside the node (tree and queue walks).
      { epoch, checkInvariants: check },
    );
    s.engine.cache.clear();
    if (calibrate) s.node.calibrate(calibrationSamples(profile, engineFaults.slowdown(s.idx, now)));
    oracle?.reset(s.idx);
    apply(s, s.node.start());
  };

  // ---- messages
  const messages: Record<string, MessageTotals> = {};
  /** Mesh bytes by part, as delivered, per BYTES_BUCKET_MS of virtual time (config.meshParts). */
  const meshPartsByTime: MeshParts[] | undefined = config.meshParts ? [] : undefined;
  const bytesByTime = newBytesByTime();
  const countMessage = (msg: PeerMessage): void => {
    const kind = messageKind(msg);
    let t = messages[kind];
    if (t === undefined) {
      t = { count: 0, bytes: 0 };
      messages[kind] = t;
    }
    const bytes = messageBytes(msg);
    t.count++;
    t.bytes += bytes;
    addBytesAt(bytesByTime, now, kind, bytes);
  };

  // ---- the client side of the workload
  const reqs = workload.requests;
  const total = reqs.length;
  const client: ClientReq[] = reqs.map(() => ({ tries: 0, startMs: -1, origin: -1, done: false }));
  const records: SimRecord[] = [];
  const latencies = new Float64Array(total);
  // Engine runs per workload request: more than one means the same work was computed twice.
  const runsPerRequest = new Uint32Array(total);
  let answered = 0;
  let failed = 0;
  let incorrect = 0;
  let duplicateReplies = 0;
  /** The peer's answer being delivered now (a reply made while handling it is the one it answers). */
  let delivering: { reqId: string; sentAt: number } | undefined;
  let retries = 0;
  /** Requests whose client hung up before the answer (faults/client.ts, `abandon`). */
  let abandoned = 0;
  /** Engine time spent on runs (ended ones: an aborted run counts until its abort). */
  let engineBusyMs = 0;
  let finished = 0;
  let sumPrompt = 0;
  let sumPredicted = 0;
  let sumActual = 0;
  let forwardedServed = 0;
  const servedCount = new Array<number>(N).fill(0);
  let nextClosed = 0;
  let lastFinishAt = 0;
  const progressStep = Math.max(1, Math.floor(total / 200));
  const closedLoop = workload.arrival === "closed-loop";
  let lastRestartAt = 0;
  // Open loop: follow-up turns (chat) are sent a think time after their predecessor is answered.
  const followUps = new Map<number, number[]>();
  if (!closedLoop) {
    reqs.forEach((r, i) => {
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
  }

  const submit = (ri: number): void => {
    const c = client[ri] as ClientReq;
    const wr = reqs[ri]!;
    const entry = (wr.entry ?? ri) % N;
    let origin = -1;
    for (let k = 0; k < N; k++) {
      const cand = (entry + k) % N;
      if (nodes[cand]?.node) {
        origin = cand;
        break;
      }
    }
    if (c.startMs < 0) {
      c.startMs = now;
      const hangUp = clientFaults.hangsUpAfter(ri);
      if (hangUp !== undefined) queue.push({ at: now + hangUp, k: "gone", req: ri });
    }
    const frozenUntil = origin >= 0 ? nodeFaults.pausedUntil(origin, now) : -1;
    if (frozenUntil >= 0) {
      // Its client's connection is accepted by the kernel, then waits for the process to resume.
      queue.push({ at: frozenUntil, k: "submit", req: ri });
      return;
    }
    if (origin < 0) {
      if (lastRestartAt > now) {
        // Whole cluster down for now: the client waits and tries again.
        queue.push({ at: now + config.pollMs, k: "submit", req: ri });
        return;
      }
      // Down for good: the request fails (an answer, not a hang).
      finish(ri, failedRecord(ri, wr, entry, c.startMs, now));
      return;
    }
    c.tries++;
    c.origin = origin;
    const s = nodes[origin] as SimNodeState;
    s.summary.entered++;
    const reqId = `r${ri}.${c.tries}`;
    s.outstanding.add(reqId);
    handle(s, {
      type: "client-request",
      reqId,
      request: {
        id: reqId,
        tokens: wr.tokens,
        maxTokens: clientFaults.maxTokens(ri, wr.maxTokens),
        ...(wr.temperature === undefined ? {} : { temperature: wr.temperature }),
        ...(config.deadlineMs === undefined ? {} : { deadlineMs: config.deadlineMs }),
      },
    });
  };

  const finish = (ri: number, rec: SimRecord): void => {
    const c = client[ri] as ClientReq;
    c.done = true;
    finished++;
    lastFinishAt = now;
    latencies[ri] = rec.latencyMs;
    if (rec.ok) {
      answered++;
      sumPrompt += rec.promptTokens;
      sumPredicted += rec.predictedHitTokens;
      sumActual += rec.actualHitTokens;
      if (rec.served >= 0) servedCount[rec.served] = (servedCount[rec.served] ?? 0) + 1;
      if (rec.served !== rec.origin) forwardedServed++;
      if (!rec.correct) incorrect++;
    } else failed++;
    if (keepRecords) records.push(rec);
    if (opts.onProgress && (finished % progressStep === 0 || finished === total))
      opts.onProgress(finished, total);
    if (closedLoop && nextClosed < total) queue.push({ at: now, k: "submit", req: nextClosed++ });
    for (const f of followUps.get(ri) ?? [])
      queue.push({ at: now + reqs[f]!.after!.thinkMs, k: "submit", req: f });
  };

  const onReply = (s: SimNodeState, e: Extract<Effect, { type: "reply" }>): void => {
    if (!s.outstanding.delete(e.reqId)) {
      duplicateReplies++;
      if (check) violations.push(`t=${now}: ${s.id} answered ${e.reqId} twice or unasked`);
      return;
    }
    const ri = Number(e.reqId.slice(1, e.reqId.indexOf(".")));
    const c = client[ri] as ClientReq;
    const wr = reqs[ri]!;
    if (!e.outcome.ok && c.tries < MAX_CLIENT_TRIES) {
      retries++;
      // Refused by load (a 429): the client waits its Retry-After, as a real one does; else at once.
      const waitSec = retryAfterSec(e.outcome);
      queue.push({ at: now + (waitSec === undefined ? 1 : waitSec * 1_000), k: "submit", req: ri });
      return;
    }
    const r = e.record;
    const ok = e.outcome.ok;
    const correct =
      ok && e.outcome.result.text === expectedText(wr.tokens, clientFaults.maxTokens(ri, wr.maxTokens));
    if (check && ok && !correct) violations.push(`t=${now}: wrong output for request ${ri}`);
    finish(ri, {
      index: ri,
      id: wr.id,
      group: wr.group,
      entry: (wr.entry ?? ri) % N,
      origin: s.idx,
      target: idxOf.get(r.target) ?? -1,
      served: r.servedBy === undefined ? -1 : (idxOf.get(r.servedBy) ?? -1),
      startMs: c.startMs,
      endMs: now,
      latencyMs: now - c.startMs,
      promptTokens: r.promptTokens,
      predictedHitTokens: r.predictedHitTokens,
      actualHitTokens: r.actualHitTokens,
      hops: r.hops,
      fallbacks: r.fallbacks,
      queueMs: r.queueMs,
      prefillMs: r.prefillMs,
      decodeMs: r.decodeMs,
      networkMs: r.networkMs,
      answerLegMs: delivering?.reqId === e.reqId ? now - delivering.sentAt : 0,
      retries: c.tries - 1,
      ok,
      correct,
    });
  };

  // ---- effects
  function apply(s: SimNodeState, effects: Effect[]): void {
    for (const e of effects) {
      switch (e.type) {
        case "send": {
          countMessage(e.msg);
          if (e.msg.type === "forward") s.summary.forwarded++;
          const to = idxOf.get(e.to);
          if (to === undefined) break;
          // A stalling peer's answers never leave it.
          const answer = e.msg.type === "result" || e.msg.type === "error";
          if (answer && nodeFaults.stalling(s.idx, now)) break;
          if (e.msg.type === "result" && nodeFaults.lying(s.idx, now)) {
            // A lying peer: the answer's text is not the model's.
            transmit(s.idx, to, { ...e.msg, result: { ...e.msg.result, text: `lie ${e.msg.result.text}` } });
            break;
          }
          transmit(s.idx, to, e.msg);
          break;
        }
        case "engine-run": {
          // A run starting after the last answer (work its origin gave up on) evicts from a tree at
          // once: settling starts again from here, as it does when such a run ends.
          if (stopAt !== Number.POSITIVE_INFINITY) stopAt = Math.max(stopAt, now + (config.settleMs ?? 0));
          for (const r of e.evicted) s.summary.evictedTokens += r.path.length - r.keep;
          const { result, durationMs: modelledMs } = s.engine.execute(e.request, e.evicted);
          // A slowed engine takes longer and says so: the node learns its costs from these times.
          const slow = engineFaults.slowdown(s.idx, now);
          const durationMs = modelledMs * slow;
          if (slow !== 1) {
            result.prefillMs *= slow;
            result.decodeMs *= slow;
          }
          const ri = Number(e.request.id.slice(1, e.request.id.indexOf(".")));
          if (ri >= 0 && ri < total) runsPerRequest[ri] = (runsPerRequest[ri] as number) + 1;
          const tokens = keyTokens(e.request);
          s.runs.set(e.jobId, { tokens, cacheTokens: e.cacheTokens, result, startedAt: now });
          const fail = engineFaults.fails();
          queue.push({ at: now + durationMs, k: "engine", node: s.idx, inc: s.inc, jobId: e.jobId, fail });
          break;
        }
        case "abort-run": {
          // The run ends now (its modelled end is ignored when it comes).
          const run = s.runs.get(e.jobId);
          if (run === undefined || run.aborted) break;
          run.aborted = true;
          queue.push({
            at: now,
            k: "engine",
            node: s.idx,
            inc: s.inc,
            jobId: e.jobId,
            fail: false,
            abort: true,
          });
          break;
        }
        case "set-timer": {
          const token = ++timerSeq;
          const key = timerKey(e.timer);
          s.timers.set(key, token);
          queue.push({
            at: now + e.delayMs,
            k: "timer",
            node: s.idx,
            inc: s.inc,
            timer: e.timer,
            key,
            token,
          });
          break;
        }
        case "cancel-timer":
          s.timers.delete(timerKey(e.timer));
          break;
        case "reply":
          onReply(s, e);
          break;
        case "mesh-send": {
          const kind = meshKind(e.msg);
          const t = messages[kind] ?? { count: 0, bytes: 0 };
          messages[kind] = t;
          const bytes = meshBytes(e.msg);
          t.count++;
          t.bytes += bytes;
          addBytesAt(bytesByTime, now, kind, bytes);
          const to = idxOf.get(e.to);
          const dest = to === undefined ? undefined : nodes[to];
          if (to === undefined || !dest?.node) break;
          const copies = net.delays(now, s.idx, to, delayBuf);
          for (let c = 0; c < copies; c++)
            queue.push({
              at: now + (delayBuf[c] as number),
              k: "mesh",
              to,
              inc: dest.inc,
              from: s.idx,
              msg: e.msg,
            });
          break;
        }
        case "verify-member":
          // The cluster authority: the simulation's own ids hold the credential, nobody else does.
          queue.push({
            at: now + 2 * config.commMs,
            k: "verified",
            node: s.idx,
            inc: s.inc,
            id: e.id,
            ok: idxOf.has(e.id),
          });
          break;
      }
    }
  }

  /** Puts `msg` from node `from` on the network to node `to` (lost if its host is down). */
  function transmit(from: number, to: number, msg: PeerMessage): void {
    const dest = nodes[to] as SimNodeState;
    if (!dest.node) return; // host down: silently lost
    const copies = net.delays(now, from, to, delayBuf);
    for (let c = 0; c < copies; c++) {
      queue.push({
        at: now + (delayBuf[c] as number),
        k: "deliver",
        to,
        inc: dest.inc,
        from,
        msg,
        sentAt: now,
      });
    }
  }

  function handle(s: SimNodeState, input: NodeInput): void {
    const n = s.node;
    if (!n) return;
    apply(s, n.handle(input));
    if (!oracle) return;
    oracle.touch(s.idx);
    if (!oracleBusy) oracleSync();
  }

  /** A snapshot reaches `dest` (watched for estimate regressions when checking invariants). */
  function deliverSnapshot(dest: SimNodeState, from: string, msg: PeerMessage): void {
    if (estimateWatch && dest.node) {
      const before = dest.node.heldOf(from);
      handle(dest, { type: "peer-message", from, msg });
      estimateWatch.check(now, dest.id, from, before, dest.node?.heldOf(from));
    } else handle(dest, { type: "peer-message", from, msg });
  }

  /**
   * Oracle mode: refresh every estimate of an owner that may have changed, until none may. A
   * refresh is handled by its receiver, which may change in turn. An owner whose state is what every
   * unpaused peer last saw costs nothing per event, and one a real snapshot reached only that peer.
   */
  function oracleSync(): void {
    if (!oracle) return;
    oracleBusy = true;
    try {
      for (let changed = true; changed; ) {
        changed = false;
        // In index order, as a pass over every node did: the same refreshes in the same order.
        for (let i = oracle.next(-1); i >= 0; i = oracle.next(i)) {
          const a = nodes[i] as SimNodeState;
          const owner = a.node;
          if (!owner) {
            oracle.settle(i);
            continue;
          }
          const state = stateOf(owner);
          const peers = oracle.peersToCheck(i, state);
          if (peers !== "all" && peers.length === 0) {
            oracle.settle(i);
            continue;
          }
          const pass = new OwnerRefresh(owner, state);
          let complete = true;
          const count = peers === "all" ? N : peers.length;
          for (let k = 0; k < count; k++) {
            const j = peers === "all" ? k : (peers[k] as number);
            const b = nodes[j] as SimNodeState;
            if (a === b || !b.node) continue;
            if (nodeFaults.pausedUntil(j, now) >= 0) {
              complete = false; // refreshed once it resumes
              continue;
            }
            if (!oracle.take(i, j, state)) continue;
            changed = true;
            deliverSnapshot(b, a.id, pass.messageFor(b.node));
          }
          oracle.passed(i, state, complete);
          if (complete) oracle.settle(i);
        }
      }
    } finally {
      oracleBusy = false;
    }
  }

  // ---- schedule
  for (const c of nodeFaults.faults.crashes ?? []) {
    lastRestartAt = Math.max(lastRestartAt, c.restartAtMs ?? 0);
    queue.push({ at: c.atMs, k: "crash", node: c.node });
    if (c.restartAtMs !== undefined) queue.push({ at: c.restartAtMs, k: "restart", node: c.node });
  }
  for (const s of nodes) boot(s);
  if (closedLoop) {
    if (total > 0) queue.push({ at: 0, k: "submit", req: nextClosed++ });
  } else {
    reqs.forEach((r, i) => {
      if (!r.after) queue.push({ at: r.arrivalMs ?? 0, k: "submit", req: i });
    });
  }

  const probe = opts.probe;
  if (probe) {
    if (!(probe.everyMs > 0)) throw new RangeError(`probe.everyMs must be > 0, got ${probe.everyMs}`);
    queue.push({ at: probe.fromMs ?? probe.everyMs, k: "probe" });
  }
  const live = probe ? nodes.map((s) => s.node) : [];
  const maxT = config.maxVirtualMs ?? 1e10;
  const settle = config.settleMs ?? 0;
  // Settling (convergence checks) starts once the last fault is over, not just the last request.
  const faultsEnd = faultsEndOf(faults);
  while (queue.size > 0) {
    const ev = queue.pop() as Ev;
    if (ev.at > maxT) break;
    if (finished === total && stopAt === Number.POSITIVE_INFINITY) {
      stopAt = Math.max(lastFinishAt, Number.isFinite(faultsEnd) ? faultsEnd : lastFinishAt) + settle;
    }
    if (ev.at > stopAt) break;
    if (nodeFaults.hasPauses && ev.k !== "submit" && ev.k !== "crash" && ev.k !== "probe") {
      // A frozen node handles nothing (a restart neither): what reaches it waits, in order, until it resumes.
      // A hang-up reaches its origin once it resumes (the client's record waits with it: it failed anyway).
      const who =
        ev.k === "gone"
          ? (client[ev.req] as ClientReq).origin
          : ev.k === "deliver" || ev.k === "mesh"
            ? ev.to
            : ev.node;
      const until = nodeFaults.pausedUntil(who, ev.at);
      if (until >= 0) {
        ev.at = until;
        queue.push(ev);
        continue;
      }
    }
    now = ev.at;
    if (ev.k === "probe") {
      // Observation only: not an event of the cluster (not counted), re-armed while the run lasts.
      for (let i = 0; i < N; i++) live[i] = (nodes[i] as SimNodeState).node;
      (probe as SimProbe).observe(now, live);
      // Alone on the agenda it would keep an idle run going forever.
      if (queue.size > 0) queue.push({ at: now + (probe as SimProbe).everyMs, k: "probe" });
      continue;
    }
    events++;
    switch (ev.k) {
      case "deliver": {
        const dest = nodes[ev.to] as SimNodeState;
        if (!dest.node || dest.inc !== ev.inc) break;
        const from = ids[ev.from] as string;
        if (ev.msg.type === "forward" && nodeFaults.refusing(ev.to, now)) {
          // A refusing peer answers every forward with a retryable error, as an HTTP 503 arrives.
          const { reqId, attempt } = ev.msg;
          const error = "refused: HTTP 503 service unavailable";
          const msg: PeerMessage = { type: "error", reqId, attempt, error, retryable: true };
          countMessage(msg);
          transmit(ev.to, ev.from, msg);
        } else if (ev.msg.type === "snapshot") {
          // A real snapshot may carry older figures than the oracle last pushed: re-push after it.
          oracle?.afterReal(ev.from, ev.to, ev.msg.snapshot.header, (nodes[ev.from] as SimNodeState).node);
          deliverSnapshot(dest, from, ev.msg);
        } else {
          if (ev.msg.type === "result") delivering = { reqId: ev.msg.reqId, sentAt: ev.sentAt };
          handle(dest, { type: "peer-message", from, msg: ev.msg });
          delivering = undefined;
        }
        break;
      }
      case "mesh": {
        const dest = nodes[ev.to] as SimNodeState;
        // Sent to an incarnation that crashed since: never delivered, so not a part either.
        if (!dest.node || dest.inc !== ev.inc) break;
        const n = dest.node;
        if (meshPartsByTime) {
          const b = Math.floor(now / BYTES_BUCKET_MS);
          while (meshPartsByTime.length <= b) meshPartsByTime.push({});
          addMeshParts(meshPartsByTime[b] as MeshParts, ev.msg, ids[ev.from] as string, (o) => n.heldOf(o));
        }
        handle(dest, { type: "mesh-message", from: ids[ev.from] as string, msg: ev.msg });
        break;
      }
      case "verified": {
        const s = nodes[ev.node] as SimNodeState;
        if (s.node && s.inc === ev.inc) handle(s, { type: "member-verified", id: ev.id, ok: ev.ok });
        break;
      }
      case "timer": {
        const s = nodes[ev.node] as SimNodeState;
        if (!s.node || s.inc !== ev.inc || s.timers.get(ev.key) !== ev.token) break;
        s.timers.delete(ev.key);
        handle(s, { type: "timer", timer: ev.timer });
        break;
      }
      case "engine": {
        const s = nodes[ev.node] as SimNodeState;
        if (!s.node || s.inc !== ev.inc) break;
        const run = s.runs.get(ev.jobId);
        if (!run || run.aborted !== ev.abort) break;
        s.runs.delete(ev.jobId);
        engineBusyMs += now - run.startedAt;
        // A run still going after the last answer (work its origin gave up on) changes a tree: the
        // settling that convergence is checked after starts again from here.
        if (stopAt !== Number.POSITIVE_INFINITY) stopAt = Math.max(stopAt, now + settle);
        if (ev.fail) {
          handle(s, { type: "engine-failed", jobId: ev.jobId, error: "injected engine failure" });
          break;
        }
        if (ev.abort) {
          // What its prefill got through stays cached (as the daemon's sim engine keeps it).
          const done = (now - run.startedAt) / Math.max(1e-9, run.result.prefillMs);
          const kept = keptOnAbort(s.engine.cache.match(run.tokens), run.cacheTokens, done);
          if (kept > 0) s.engine.complete(run.tokens, kept);
          handle(s, { type: "engine-aborted", jobId: ev.jobId, kept });
          if (check && s.node) checkTreeMirrorsEngine(now, s.id, s.node, s.engine, violations);
          break;
        }
        s.engine.complete(run.tokens, run.cacheTokens);
        s.summary.served++;
        handle(s, { type: "engine-done", jobId: ev.jobId, result: run.result });
        if (check && s.node) checkTreeMirrorsEngine(now, s.id, s.node, s.engine, violations);
        break;
      }
      case "submit":
        if (!(client[ev.req] as ClientReq).done) submit(ev.req);
        break;
      case "gone": {
        const c = client[ev.req] as ClientReq;
        if (c.done) break;
        // Its origin is told (if it still waits there: else a crash or a retry's wait dropped it).
        const s = c.origin >= 0 ? nodes[c.origin] : undefined;
        const reqId = `r${ev.req}.${c.tries}`;
        if (s?.node && s.outstanding.delete(reqId)) handle(s, { type: "client-gone", reqId });
        abandoned++;
        const wr = reqs[ev.req]!;
        finish(ev.req, failedRecord(ev.req, wr, (wr.entry ?? ev.req) % N, c.startMs, now));
        break;
      }
      case "crash": {
        const s = nodes[ev.node] as SimNodeState;
        if (!s.node) break;
        s.summary.servedForPeers += s.node.stats().servedForPeers;
        s.node = null;
        s.inc++;
        s.timers.clear();
        s.runs.clear();
        s.engine.cache.clear();
        s.summary.crashes++;
        // The clients connected to it see their connections drop and re-submit elsewhere.
        for (const reqId of s.outstanding) {
          const ri = Number(reqId.slice(1, reqId.indexOf(".")));
          retries++;
          queue.push({ at: now, k: "submit", req: ri });
        }
        s.outstanding.clear();
        break;
      }
      case "restart": {
        const s = nodes[ev.node] as SimNodeState;
        if (s.node) break;
        s.inc++;
        boot(s);
        break;
      }
    }
  }

  if (check) {
    const converged = finished === total && settle > 0 && Number.isFinite(faultsEnd);
    // Holding some members, not all: under maxEstimates, or with more members than maxPeers.
    const heldOnly =
      settings.maxEstimates !== undefined || (settings.maxPeers !== undefined && settings.maxPeers < N - 1);
    checkConvergence(nodes, violations, converged, heldOnly);
  }

  // ---- totals
  const lat = latencies.filter((_, i) => (client[i] as ClientReq).done);
  lat.sort();
  let sumLat = 0;
  for (const v of lat) sumLat += v;
  let hot = 0;
  for (let i = 1; i < N; i++) if ((servedCount[i] ?? 0) > (servedCount[hot] ?? 0)) hot = i;
  let msgCount = 0;
  let msgBytes = 0;
  for (const t of Object.values(messages)) {
    msgCount += t.count;
    msgBytes += t.bytes;
  }
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
  const pct = (p: number): number =>
    lat.length === 0 ? 0 : (lat[Math.min(lat.length - 1, Math.floor(p * lat.length))] as number);
  return {
    config,
    profile,
    capacityTokens: capacity,
    workload: { name: workload.name, synthetic: workload.synthetic, requests: total },
    records,
    totals: {
      requests: total,
      answered,
      failed,
      incorrect,
      duplicateReplies,
      meanLatencyMs: lat.length === 0 ? 0 : sumLat / lat.length,
      p50LatencyMs: pct(0.5),
      p99LatencyMs: pct(0.99),
      expectedHitRate: sumPrompt === 0 ? 0 : sumPredicted / sumPrompt,
      actualHitRate: sumPrompt === 0 ? 0 : sumActual / sumPrompt,
      hotspotShare: answered === 0 ? 0 : (servedCount[hot] ?? 0) / answered,
      hotspotNode: hot,
      forwardedShare: answered === 0 ? 0 : forwardedServed / answered,
      messages,
      ...(meshPartsByTime ? { meshParts: sumMeshParts(meshPartsByTime), meshPartsByTime } : {}),
      bytesByTime,
      messagesTotal: msgCount,
      bytesTotal: msgBytes,
      ...sums,
      engineRuns,
      engineBusyMs,
      duplicateRuns,
      evictedTokens: evicted,
      retries,
      ...(abandoned > 0 ? { abandoned } : {}),
    },
    perNode: nodes.map((s) => s.summary),
    virtualMs: now,
    wallMs: performance.now() - wallStart,
    events,
    invariantViolations: violations,
  };
}

/**
 * The run's mesh protocol: as configured, else the daemon's when running as the daemon does (the
 * oracle, and the centralized baseline on it, push full-mesh snapshots: the full mesh for them).
 */
export function simGossip(c: SimConfig): "full" | "scuttlebutt" {
  if (c.gossip !== undefined) return c.gossip;
  if (c.daemonConfig !== true || c.oracle === true || c.policy === "centralized") return "full";
  return DAEMON_NODE_DEFAULTS.gossip;
}

function validate(c: SimConfig, requests: number): void {
  const bad = (m: string): never => {
    throw new RangeError(`invalid simulation config: ${m}`);
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
  // The oracle pushes full-mesh snapshots: it has no meaning under scuttlebutt.
  if (simGossip(c) === "scuttlebutt" && (c.oracle === true || c.policy === "centralized"))
    bad(`oracle (and centralized, which runs on it) runs with gossip "full" only`);
  if (c.maxEstimates !== undefined && !(Number.isInteger(c.maxEstimates) && c.maxEstimates >= 1))
    bad(`maxEstimates must be a positive integer, got ${c.maxEstimates}`);
  checkFaults(c.faults ?? {}, c.nodes, bad, requests);
}

function failedRecord(
  index: number,
  wr: Workload["requests"][number],
  entry: number,
  startMs: number,
  now: number,
): SimRecord {
  return {
    index,
    id: wr.id,
    group: wr.group,
    entry,
    origin: -1,
    target: -1,
    served: -1,
    startMs,
    endMs: now,
    latencyMs: now - startMs,
    promptTokens: wr.tokens.length,
    predictedHitTokens: 0,
    actualHitTokens: 0,
    hops: 0,
    fallbacks: 0,
    queueMs: 0,
    prefillMs: 0,
    decodeMs: 0,
    networkMs: 0,
    retries: 0,
    ok: false,
    correct: false,
  };
}
