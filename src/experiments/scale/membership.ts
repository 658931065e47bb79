/**
 * The scuttlebutt mode's membership protocol alone (SWIM + Lifeguard, src/sim/membership-sim.ts) at
 * each N: its bytes per node per second, when the members declare a crashed node dead (first and last),
 * and the suspicions of live members, with no loss and with LOSS. It runs the node's own Swim code
 * without the rest of the node, so it reaches 1,024 nodes where the full node simulator cannot.
 */
import { swimSize } from "../../core/node/swim/codec.js";
import {
  pushPullScale,
  resolveSwimConfig,
  retransmitLimit,
  suspicionMinMs,
} from "../../core/node/swim/config.js";
import { runMembership } from "../../sim/membership-sim.js";
import { cpuMsSince } from "./cpu.js";
import { COMM_MS, JITTER_MS } from "./grid.js";

export interface MembershipCell {
  nodes: number;
  loss: number;
  /** SWIM bytes and messages per node per second, from 10 s before the crash to the end (formation left out). */
  bytesPerNodeS: number;
  msgsPerNodeS: number;
  /**
   * Formation: when the last member joined someone's list (the last `alive` before the crash), and the
   * bytes per node sent until STEADY_MS before the crash (all joins and their piggybacked news).
   */
  formationMs: number;
  formationBytesPerNode: number;
  /** The STEADY_MS before the crash, after formation: probes, acks and no news (heartbeat-only). */
  steadyBytesPerNodeS: number;
  /**
   * The periodic push-pull, per node per second on average: our whole member list and the partner's
   * answer (what our list lacks: in a settled cluster, only itself) per node per push-pull interval (30 s ×
   * memberlist's pushPullScale), the list sized by the codec at this N. It is the one SWIM cost that grows
   * with N (as N / log N).
   */
  pushPullBytesPerNodeS: number;
  crashedAtMs: number;
  observers: number;
  /** Members that declared the crashed node dead within the run. */
  declaredDead: number;
  firstSuspectMs?: number;
  firstDeadMs?: number;
  lastDeadMs?: number;
  /** memberlist's bound on detection at this N (see `memberlistBoundMs`). */
  boundMs: number;
  /** Suspect declarations about a member that was alive, over the whole run (every observer). */
  falseSuspicions: number;
  /** Distinct live members suspected at least once (one suspicion spreads to every member). */
  falselySuspectedMembers: number;
  /** Of those, suspicions that reached "dead" (a live member removed). */
  falseDeaths: number;
  durationMs: number;
  wallMs: number;
  /** Process CPU (user + system) of the run, ms. */
  cpuMs: number;
}

/**
 * Our reading of memberlist's worst case for every member to learn of a crash: a probe period until
 * someone probes it, the probe timeout, Lifeguard's longest suspicion timeout (suspicionMaxTimeoutMult
 * × the floor 4 × max(1, log10 N) × probe interval), then the dead news' retransmissions
 * (retransmitLimit gossip ticks).
 */
export function memberlistBoundMs(n: number): number {
  const c = resolveSwimConfig();
  return (
    c.probeIntervalMs +
    c.probeTimeoutMs +
    c.suspicionMaxTimeoutMult * suspicionMinMs(c, n) +
    retransmitLimit(c, n) * c.gossipIntervalMs
  );
}

/** The steady-state window before the crash. */
const STEADY_MS = 10_000;

/**
 * Formation (every node joins through the seeds at once; each join's news is piggybacked
 * 4 × ⌈log10(N + 1)⌉ times by every member, at most 16 updates a message) takes ≈ 60 ms per node
 * here; the crash comes after it and a steady window, and the run lasts past the bound.
 */
export function runMembershipCell(nodes: number, loss: number, seed: number): MembershipCell {
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  const crashedAtMs = 20_000 + 60 * nodes;
  const boundMs = memberlistBoundMs(nodes);
  const durationMs = crashedAtMs + boundMs + 5_000;
  const crashed = nodes - 1;
  const countFromMs = crashedAtMs - STEADY_MS;
  const r = runMembership({
    nodes,
    seed,
    commMs: COMM_MS,
    jitterMs: JITTER_MS,
    durationMs,
    seeds: nodes > 1 ? [0, 1] : [0],
    ...(loss > 0 ? { network: { lossProb: loss } } : {}),
    crashes: nodes > 1 ? [{ node: crashed, atMs: crashedAtMs }] : [],
    countFromMs,
    windowMs: 1_000,
  });
  const crashedId = `n${crashed}`;
  // Counted from countFromMs (formation left out) to the end; the crashed node sends nothing after its crash.
  let bytes = 0;
  let msgs = 0;
  for (const m of Object.values(r.messages)) {
    bytes += m.bytes;
    msgs += m.count;
  }
  const windowS = (durationMs - countFromMs) / 1000;
  let falseSuspicions = 0;
  let falseDeaths = 0;
  let firstSuspect: number | undefined;
  const deadAt = new Map<string, number>();
  const suspectedIds = new Set<string>();
  for (const ch of r.trace) {
    if (ch.id === crashedId && ch.at >= crashedAtMs) {
      if (ch.to === "suspect" && firstSuspect === undefined) firstSuspect = ch.at - crashedAtMs;
      if (ch.to === "dead" && !deadAt.has(ch.observer)) deadAt.set(ch.observer, ch.at - crashedAtMs);
      continue;
    }
    if (ch.to === "suspect") {
      falseSuspicions++;
      suspectedIds.add(ch.id);
    }
    if (ch.to === "dead") falseDeaths++;
  }
  const observers = r.members.filter((m, i) => m !== null && i !== crashed).length;
  let formationMs = 0;
  for (const ch of r.trace)
    if (ch.at < crashedAtMs && ch.to === "alive") formationMs = Math.max(formationMs, ch.at);
  const windowSum = (fromS: number, toS: number): number =>
    r.bytesPerWindow.slice(fromS, toS).reduce((a, b) => a + b, 0);
  const steadyFromS = Math.ceil(countFromMs / 1000);
  const steadyToS = Math.floor(crashedAtMs / 1000);
  const c = resolveSwimConfig();
  const anyone = r.members.find((m) => m !== null);
  const list = anyone
    ? swimSize({
        type: "sync",
        reply: true,
        members: [
          { id: anyone.selfId, status: "alive", incarnation: 0 },
          ...anyone.memberViews().map(({ id, status, incarnation }) => ({ id, status, incarnation })),
        ],
      })
    : 0;
  // A settled partner's answer names only itself (what our list lacked: nothing; swim.ts sendSync).
  const answer = anyone
    ? swimSize({
        type: "sync",
        reply: false,
        members: [{ id: anyone.selfId, status: "alive", incarnation: 0 }],
      })
    : 0;
  const times = [...deadAt.values()];
  return {
    nodes,
    loss,
    bytesPerNodeS: bytes / nodes / windowS,
    msgsPerNodeS: msgs / nodes / windowS,
    formationMs,
    formationBytesPerNode: windowSum(0, steadyFromS) / nodes,
    steadyBytesPerNodeS: windowSum(steadyFromS, steadyToS) / nodes / (steadyToS - steadyFromS),
    pushPullBytesPerNodeS: (list + answer) / ((c.pushPullIntervalMs * pushPullScale(nodes)) / 1000),
    crashedAtMs,
    observers,
    declaredDead: deadAt.size,
    ...(firstSuspect === undefined ? {} : { firstSuspectMs: firstSuspect }),
    ...(times.length > 0 ? { firstDeadMs: Math.min(...times) } : {}),
    ...(times.length === observers && times.length > 0 ? { lastDeadMs: Math.max(...times) } : {}),
    boundMs,
    falseSuspicions,
    falselySuspectedMembers: suspectedIds.size,
    falseDeaths,
    durationMs,
    wallMs: performance.now() - t0,
    cpuMs: cpuMsSince(cpu0),
  };
}
