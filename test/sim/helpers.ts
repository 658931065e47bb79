/** Small seeded workloads, clusters and invariant checks for the simulator tests. */
import { DAEMON_NODE_DEFAULTS } from "../../src/core/node/config.js";
import type { PrefixNode } from "../../src/core/node/node.js";
import type { SwimMemberView } from "../../src/core/node/swim/types.js";
import { Prng } from "../../src/core/prng.js";
import { DEFAULT_PROFILE } from "../../src/engines/sim/profiles.js";
import { nodeSettingsSchema } from "../../src/server/settings/index.js";
import { faultScheduleFor } from "../../src/sim/fault-schedule.js";
import type { NodeFaults } from "../../src/sim/faults/node.js";
import { runSimulation } from "../../src/sim/run.js";
import type { SimConfig, SimResult } from "../../src/sim/types.js";
import type { Workload, WorkloadRequest } from "../../src/workload/types.js";

/** `topics` shared prefixes of ~prefix tokens, each request = one prefix + a unique suffix. */
export function tinyWorkload(opts: {
  seed: number;
  requests: number;
  topics?: number;
  prefix?: number;
  suffix?: number;
  arrival?: Workload["arrival"];
  /** open loop: mean gap between arrivals, ms */
  gapMs?: number;
}): Workload {
  const rng = new Prng(opts.seed);
  const topics = opts.topics ?? 5;
  const prefixes = Array.from({ length: topics }, (_, t) => {
    const n = (opts.prefix ?? 64) + rng.int(32);
    return Uint32Array.from({ length: n }, (_, i) => 1 + ((t * 7919 + i * 31) % 50_000));
  });
  const requests: WorkloadRequest[] = [];
  let at = 0;
  for (let i = 0; i < opts.requests; i++) {
    const t = rng.int(topics);
    const p = prefixes[t] as Uint32Array;
    const n = (opts.suffix ?? 16) + rng.int(16);
    const tokens = new Uint32Array(p.length + n);
    tokens.set(p);
    for (let k = 0; k < n; k++) tokens[p.length + k] = 60_000 + rng.int(40_000);
    const r: WorkloadRequest = { id: `q${i}`, tokens, group: `topic${t}`, maxTokens: 1 };
    if (opts.arrival === "open-loop") {
      at += rng.next() * 2 * (opts.gapMs ?? 50);
      r.arrivalMs = at;
    }
    requests.push(r);
  }
  return { name: "tiny", synthetic: true, requests, arrival: opts.arrival ?? "closed-loop" };
}

/**
 * What breaks the fault-schedule invariants in a run of `total` requests, or undefined: every request
 * finishes, none answered twice or wrongly, none failed unless engines failed, no invariant violated.
 */
export function runProblems(r: SimResult, total: number): string | undefined {
  const t = r.totals;
  const out: string[] = [];
  if (t.answered + t.failed !== total) out.push(`${total - t.answered - t.failed} never finished`);
  if (t.incorrect > 0) out.push(`${t.incorrect} wrong answers`);
  if (t.duplicateReplies > 0) out.push(`${t.duplicateReplies} answered twice`);
  // Only an engine failing every try of a request fails it: nothing else may.
  if (t.failed > 0 && !((r.config.faults?.engine?.failProb ?? 0) > 0))
    out.push(`${t.failed} failed without engine failures`);
  out.push(...r.invariantViolations.slice(0, 3));
  return out.length === 0 ? undefined : out.join("; ");
}

/** Seeds 1…count in runs of `size`: one test per run keeps each within the test timeout. */
export function seedChunks(count: number, size = 50): number[][] {
  const out: number[][] = [];
  for (let from = 1; from <= count; from += size) {
    out.push(Array.from({ length: Math.min(size, count - from + 1) }, (_, i) => from + i));
  }
  return out;
}

/** Four small nodes on a 2 ± 0.5 ms network, polling every 100 ms: the simulator tests' usual cluster. */
export function smallCluster(over: Partial<SimConfig> = {}): SimConfig {
  return {
    nodes: 4,
    policy: "affinity",
    commMs: 2,
    jitterMs: 0.5,
    pollMs: 100,
    profile: DEFAULT_PROFILE,
    capacityTokens: 1_000,
    seed: 1,
    ...over,
  };
}

/** The daemon's Δpoll (its settings' default). */
export const DAEMON_POLL_MS = nodeSettingsSchema.shape.pollMs.def.defaultValue;

/** A run in the daemon's configuration (`daemonConfig`, its policy and Δpoll) on 2 ms links. */
export function daemonSimConfig(seed: number, nodes: number): SimConfig {
  return {
    nodes,
    policy: DAEMON_NODE_DEFAULTS.policy,
    daemonConfig: true,
    commMs: 2,
    jitterMs: 0.5,
    pollMs: DAEMON_POLL_MS,
    profile: DEFAULT_PROFILE,
    seed,
  };
}

/**
 * A seeded fault-schedule run in the daemon's configuration, with the seed's whole fault schedule
 * drawn over `faultWindowMs`; callers add gossip and settling.
 */
export function daemonFaultConfig(seed: number, nodes: number, faultWindowMs: number): SimConfig {
  return {
    ...daemonSimConfig(seed, nodes),
    capacityTokens: 3_000,
    faults: faultScheduleFor(seed, nodes, faultWindowMs),
    checkInvariants: true,
    keepRecords: false,
  };
}

/**
 * A daemon-configured SWIM run of `nodes` with node `faults`, probed every 50 ms: in how many probes a
 * node held as a member (alive or suspect) someone `admits(i, live)` says it must not, how many probes
 * ran, and the nodes at the last one.
 */
export function runWatchingAdmissions(
  seed: number,
  nodes: number,
  requests: number,
  faults: NodeFaults,
  admits: (i: number, live: readonly SwimMemberView[]) => boolean,
) {
  const w = tinyWorkload({ seed, requests, arrival: "open-loop", gapMs: 100 });
  let admitted = 0;
  let seen = 0;
  let last: readonly (PrefixNode | null)[] = [];
  const r = runSimulation(
    { ...daemonSimConfig(seed, nodes), gossip: "scuttlebutt", faults: { node: faults }, settleMs: 20_000 },
    w,
    {
      probe: {
        everyMs: 50,
        observe(_now, probed) {
          seen++;
          last = probed;
          for (const [i, n] of probed.entries()) {
            const live = (n?.meshMembers() ?? []).filter(
              (m) => m.status === "alive" || m.status === "suspect",
            );
            if (admits(i, live)) admitted++;
          }
        },
      },
    },
  );
  return { r, w, admitted, seen, last };
}
