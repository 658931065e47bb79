/**
 * The discrete-event simulator: N unchanged `PrefixNode`s (src/core/node) on a simulated network,
 * each with a simulated engine, driven by a workload in virtual time. One seeded PRNG feeds every
 * random choice (network, node jitter and tie-breaks, engine faults), so the same config + workload
 * gives the identical run. Snapshots travel as immutable objects (no bytes in the hot path); the
 * bytes the codec would send are counted with `encodedSize`.
 *
 * This file is the run loop: it boots the nodes, feeds them the events in order and decides what
 * each event does. Its parts: setup.ts (the options), run-state.ts (events, hosts), clients.ts (the
 * workload's side), effects.ts (what a node's effects do), oracle-sync.ts, traffic.ts, totals.ts.
 */

import { PrefixNode } from "../core/node/node.js";
import type { NodeInput, PeerMessage } from "../core/node/types.js";
import { Prng } from "../core/prng.js";
import { resolveProfile } from "../engines/sim/profiles.js";
import { keptOnAbort } from "../engines/sim/sim-engine.js";
import type { Workload } from "../workload/types.js";
import { calibrationSamples } from "./calibration.js";
import { SimClients } from "./clients.js";
import { SimEffects } from "./effects.js";
import { EventQueue } from "./event-queue.js";
import { faultsEnd as faultsEndOf } from "./fault-schedule.js";
import { ClientFaultModel } from "./faults/client.js";
import { EngineFaultModel } from "./faults/engine.js";
import { NodeFaultModel } from "./faults/node.js";
import { faultsOverAt } from "./faults/unbegun.js";
import { checkConvergence, checkTreeMirrorsEngine, EstimateWatch } from "./invariants.js";
import { SimNetwork } from "./network.js";
import { Oracle } from "./oracle.js";
import { OracleSync } from "./oracle-sync.js";
import type { SimProbe } from "./probe.js";
import { QueueWaits } from "./queue-waits.js";
import { type Ev, newNodeState, type SimNodeState } from "./run-state.js";
import { nodeSettings, simGossip, validate } from "./setup.js";
import { SharedKeySets, SharedPeerIndex } from "./shared-estimates.js";
import { collectTotals } from "./totals.js";
import { Traffic } from "./traffic.js";
import type { SimConfig, SimProgress, SimResult } from "./types.js";

export type { SimConfig, SimFaults, SimProgress, SimRecord, SimResult } from "./types.js";

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
  const check = config.checkInvariants === true;
  const violations: string[] = [];
  const estimateWatch = check ? new EstimateWatch(violations) : undefined;
  // The centralized baseline IS a router with the global view: it always runs with the oracle.
  const oracle =
    config.oracle === true || config.policy === "centralized"
      ? new Oracle(N, config.oracleExhaustive === true)
      : undefined;
  const gossip = simGossip(config);
  const settings = nodeSettings(config, gossip);
  // Every estimate of an owner is the same under the oracle: one key set serves every node holding it.
  const keySets =
    oracle && config.oracleOwnIndexes !== true && (settings.estimateStepKeys ?? 0) === 0
      ? new SharedKeySets()
      : undefined;
  const peerIndex = keySets ? (maxOwners: number) => new SharedPeerIndex(maxOwners, keySets) : undefined;
  const calibrate = config.calibrate ?? config.daemonConfig === true;
  const settle = config.settleMs ?? 0;
  /** When the run stops: set once every request is answered (∞ until then). */
  let stopAt = Number.POSITIVE_INFINITY;
  /** Work after the last answer changes a tree: the settling convergence is checked after starts again. */
  const unsettle = (): void => {
    if (stopAt !== Number.POSITIVE_INFINITY) stopAt = Math.max(stopAt, now + settle);
  };

  const nodes: SimNodeState[] = ids.map((id, idx) => newNodeState(id, idx, profile, capacity));
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
    effects.apply(s, s.node.start());
  };

  const traffic = new Traffic(config.meshParts === true);
  const clients = new SimClients(
    workload,
    N,
    clientFaults,
    queue,
    idxOf,
    config.keepRecords !== false,
    check ? violations : undefined,
    opts,
  );
  const total = clients.total;
  /** The peer's answer being delivered now (a reply made while handling it is the one it answers). */
  let delivering: { reqId: string; sentAt: number; peer: number; attempt: number } | undefined;
  const queueWaits = new QueueWaits();
  /** Engine time spent on runs (ended ones: an aborted run counts until its abort). */
  let engineBusyMs = 0;
  let lastRestartAt = 0;

  const effects = new SimEffects({
    nodes,
    idxOf,
    queue,
    net,
    traffic,
    queueWaits,
    nodeFaults,
    engineFaults,
    commMs: config.commMs,
    requests: total,
    now: () => now,
    reply: (s, e) => {
      if (!s.outstanding.delete(e.reqId)) {
        clients.duplicate();
        if (check) violations.push(`t=${now}: ${s.id} answered ${e.reqId} twice or unasked`);
        return;
      }
      const answer = delivering?.reqId === e.reqId ? delivering : undefined;
      clients.reply(s.idx, e, now, answer ? now - answer.sentAt : 0, queueWaits.take(e.reqId, now, answer));
    },
    runStarted: unsettle,
  });
  const oracleSync = oracle
    ? new OracleSync(oracle, nodes, (j) => nodeFaults.pausedUntil(j, now) >= 0, deliverSnapshot)
    : undefined;

  const submit = (ri: number): void => {
    const entry = clients.entryOf(ri);
    let origin = -1;
    for (let k = 0; k < N; k++) {
      const cand = (entry + k) % N;
      if (nodes[cand]?.node) {
        origin = cand;
        break;
      }
    }
    clients.begin(ri, now);
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
      clients.fail(ri, now);
      return;
    }
    const reqId = clients.tryAt(ri, origin);
    const s = nodes[origin] as SimNodeState;
    s.summary.entered++;
    s.outstanding.add(reqId);
    queueWaits.submitted(reqId, now);
    handle(s, { type: "client-request", reqId, request: clients.request(ri, reqId, config.deadlineMs) });
  };

  function handle(s: SimNodeState, input: NodeInput): void {
    const n = s.node;
    if (!n) return;
    effects.apply(s, n.handle(input));
    oracleSync?.touched(s.idx);
  }

  /** A snapshot reaches `dest` (watched for estimate regressions when checking invariants). */
  function deliverSnapshot(dest: SimNodeState, from: string, msg: PeerMessage): void {
    if (estimateWatch && dest.node) {
      const before = dest.node.heldOf(from);
      handle(dest, { type: "peer-message", from, msg });
      estimateWatch.check(now, dest.id, from, before, dest.node?.heldOf(from));
    } else handle(dest, { type: "peer-message", from, msg });
  }

  // ---- schedule
  for (const c of nodeFaults.faults.crashes ?? []) {
    lastRestartAt = Math.max(lastRestartAt, c.restartAtMs ?? 0);
    queue.push({ at: c.atMs, k: "crash", node: c.node });
    if (c.restartAtMs !== undefined) queue.push({ at: c.restartAtMs, k: "restart", node: c.node });
  }
  for (const s of nodes) boot(s);
  clients.schedule();

  const probe = opts.probe;
  if (probe) {
    if (!(probe.everyMs > 0)) throw new RangeError(`probe.everyMs must be > 0, got ${probe.everyMs}`);
    queue.push({ at: probe.fromMs ?? probe.everyMs, k: "probe" });
  }
  const live = probe ? nodes.map((s) => s.node) : [];
  const maxT = config.maxVirtualMs ?? 1e10;
  let never: string[] = []; // faults the run stopped without (faultsOverAt: settling waits for faults)
  while (queue.size > 0) {
    const ev = queue.pop() as Ev;
    if (ev.at > maxT) break;
    if (clients.finished === total && stopAt === Number.POSITIVE_INFINITY) {
      ({ stopMs: stopAt, never } = faultsOverAt(faults, clients.lastFinishAt, settle));
    }
    if (ev.at > stopAt) break;
    if (nodeFaults.hasPauses && ev.k !== "submit" && ev.k !== "crash" && ev.k !== "probe") {
      // A frozen node handles nothing (a restart neither): what reaches it waits, in order, until it resumes.
      // A hang-up reaches its origin once it resumes (the client's record waits with it: it failed anyway).
      const who =
        ev.k === "gone" ? clients.originOf(ev.req) : ev.k === "deliver" || ev.k === "mesh" ? ev.to : ev.node;
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
          traffic.peer(msg, now);
          effects.transmit(ev.to, ev.from, msg);
        } else if (ev.msg.type === "snapshot") {
          // A real snapshot may carry older figures than the oracle last pushed: re-push after it.
          oracle?.afterReal(ev.from, ev.to, ev.msg.snapshot.header, (nodes[ev.from] as SimNodeState).node);
          deliverSnapshot(dest, from, ev.msg);
        } else {
          const { msg } = ev;
          if (msg.type === "forward")
            queueWaits.delivered(msg.reqId, ev.to, msg.attempt, now, msg.deadlineMs);
          if (msg.type === "result")
            delivering = { reqId: msg.reqId, sentAt: ev.sentAt, peer: ev.from, attempt: msg.attempt };
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
        traffic.meshDelivered(now, ev.msg, ids[ev.from] as string, (o) => n.heldOf(o));
        handle(dest, { type: "mesh-message", from: ids[ev.from] as string, msg: ev.msg });
        break;
      }
      case "verify":
      case "verified": {
        const s = nodes[ev.node] as SimNodeState;
        if (!s.node || s.inc !== ev.inc) break;
        if (ev.k === "verify") effects.tryHello(s, ev.id, ev.attempt);
        else handle(s, effects.answer(s, ev.id, ev.ok));
        break;
      }
      case "timer": {
        const s = nodes[ev.node] as SimNodeState;
        if (!s.node || s.inc !== ev.inc || s.timers.get(ev.key) !== ev.token) break;
        s.timers.delete(ev.key);
        if (ev.timer.kind === "forward") queueWaits.ended(ev.timer.reqId, ev.timer.attempt, now);
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
        unsettle();
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
        if (!clients.isDone(ev.req)) submit(ev.req);
        break;
      case "gone": {
        if (clients.isDone(ev.req)) break;
        // Its origin is told (if it still waits there: else a crash or a retry's wait dropped it).
        const origin = clients.originOf(ev.req);
        const s = origin >= 0 ? nodes[origin] : undefined;
        const reqId = clients.reqIdOf(ev.req);
        if (s?.node && s.outstanding.delete(reqId)) handle(s, { type: "client-gone", reqId });
        queueWaits.drop(reqId);
        clients.abandon(ev.req, now);
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
        queueWaits.crashed(ev.node, s.outstanding, now);
        for (const reqId of s.outstanding) clients.resubmit(reqId, now);
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
    const converged = clients.finished === total && settle > 0 && Number.isFinite(faultsEndOf(faults));
    // Holding some members, not all: under maxEstimates, or with more members than maxPeers.
    const heldOnly =
      settings.maxEstimates !== undefined || (settings.maxPeers !== undefined && settings.maxPeers < N - 1);
    checkConvergence(nodes, violations, converged, heldOnly);
  }

  return {
    config,
    profile,
    capacityTokens: capacity,
    workload: { name: workload.name, synthetic: workload.synthetic, requests: total },
    records: clients.records,
    totals: collectTotals(clients, traffic, nodes, effects.runsPerRequest, engineBusyMs),
    perNode: nodes.map((s) => s.summary),
    virtualMs: now,
    wallMs: performance.now() - wallStart,
    events,
    invariantViolations: violations,
    ...(never.length > 0 ? { faultsNeverBegun: { afterMs: clients.lastFinishAt, faults: never } } : {}),
  };
}
