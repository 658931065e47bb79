/** Small seeded workloads and fault schedules for the simulator tests. */
import { Prng } from "../../src/core/prng.js";
import { DEFAULT_PROFILE } from "../../src/engines/sim/profiles.js";
import type { SimConfig, SimCrash, SimFaults, SimPartition } from "../../src/sim/types.js";
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

/** A random fault schedule over [0, horizonMs): link faults, partitions, crashes that restart. */
export function randomFaults(seed: number, nodes: number, horizonMs: number): SimFaults {
  const rng = new Prng(seed ^ 0x5eed);
  const partitions: SimPartition[] = [];
  const crashes: SimCrash[] = [];
  const f = {
    network: {
      lossProb: rng.next() * 0.2,
      dupProb: rng.next() * 0.1,
      reorderProb: rng.next() * 0.2,
      reorderMaxMs: 50,
      untilMs: horizonMs,
      partitions,
    },
    node: { crashes },
  } satisfies SimFaults;
  const parts = rng.int(3);
  for (let i = 0; i < parts; i++) {
    const start = rng.next() * horizonMs;
    const cut = 1 + rng.int(nodes - 1);
    const order = rng.shuffle(Array.from({ length: nodes }, (_, k) => k));
    partitions.push({
      startMs: start,
      endMs: Math.min(horizonMs, start + rng.next() * horizonMs * 0.3),
      groups: [order.slice(0, cut), order.slice(cut)],
    });
  }
  const crashCount = rng.int(3);
  for (let i = 0; i < crashCount; i++) {
    const at = rng.next() * horizonMs * 0.8;
    crashes.push({ node: rng.int(nodes), atMs: at, restartAtMs: at + 1 + rng.next() * horizonMs * 0.2 });
  }
  return f;
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
