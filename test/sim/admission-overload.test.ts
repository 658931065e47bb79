/**
 * Admission by expected wait (`maxWaitMs`) as `experiment compare` overloads it: 16 nodes in the
 * daemon's configuration, an open loop of Zipf-skewed MMLU-shaped prompts (synthetic pool, fixed
 * seed) at 120% of the cluster's capacity, measured as the experiment measures it (`local`, closed
 * loop, on the same schedule). No admitted request may wait past the bound: from its admission at
 * the entry node to the start of its run (queues, forwards, fallbacks; the answer's way back from
 * the peer that ran it comes after).
 */
import { describe, expect, it } from "vitest";
import { DAEMON_NODE_DEFAULTS } from "../../src/core/node/config.js";
import { DEFAULT_PROFILE } from "../../src/engines/sim/profiles.js";
import { runSimulation } from "../../src/sim/run.js";
import type { SimConfig } from "../../src/sim/types.js";
import { syntheticMmlu } from "../../src/workload/synthetic.js";

const NODES = 16;
const MAX_WAIT_MS = 5_000;
const SEED = 4;
const REQUESTS = 1_000;

const schedule = (openLoopRate?: number) =>
  syntheticMmlu({
    seed: SEED,
    requests: REQUESTS,
    skewed: { kind: "zipf", s: 1.1, repeats: true },
    ...(openLoopRate === undefined ? {} : { openLoopRate }),
  });

const cluster: SimConfig = {
  nodes: NODES,
  policy: "local",
  commMs: 2,
  jitterMs: 0.5,
  pollMs: 500,
  profile: DEFAULT_PROFILE,
  seed: SEED,
};

describe("admission by expected wait at 120% of capacity", () => {
  it("keeps every admitted request's wait to its run within maxWaitMs", () => {
    // Capacity: nodes / the service time local measures with one request in flight.
    const serviceS = runSimulation(cluster, schedule()).totals.meanLatencyMs / 1_000;
    const rate = (1.2 * NODES) / serviceS;
    const r = runSimulation(
      {
        ...cluster,
        policy: DAEMON_NODE_DEFAULTS.policy,
        daemonConfig: true,
        node: { maxWaitMs: MAX_WAIT_MS },
      },
      schedule(rate),
    );
    expect(r.totals.duplicateReplies).toBe(0);
    expect(r.totals.incorrect).toBe(0);
    const answered = r.records.filter((x) => x.ok);
    // Overloaded: some requests are refused (at least once), most are answered.
    expect(r.records.some((x) => x.retries > 0)).toBe(true);
    expect(answered.length).toBeGreaterThan(0.9 * REQUESTS);
    const forwarded = answered.filter((x) => x.served !== x.origin);
    expect(forwarded.length).toBeGreaterThan(0);
    for (const x of forwarded) expect(x.answerLegMs, x.id).toBeGreaterThan(0);
    const over = answered
      .map((x) => ({ id: x.id, waitMs: x.queueMs + x.networkMs - (x.answerLegMs ?? 0) }))
      .filter((x) => x.waitMs > MAX_WAIT_MS);
    expect(over).toEqual([]);
  });
});
