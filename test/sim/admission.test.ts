/**
 * Admission by expected wait (`maxWaitMs`), in the daemon's configuration, fixed seed: an open loop
 * at about twice the cluster's capacity for 20 s, then light load. Shedding starts within 2 s, the
 * requests admitted wait about the bound at most, and latency is back to normal once the load stops.
 * (The simulated client re-submits a refused request after its Retry-After, up to 4 tries, then counts
 * it failed.)
 */
import { describe, expect, it } from "vitest";
import { DAEMON_NODE_DEFAULTS } from "../../src/core/node/config.js";
import { DEFAULT_PROFILE } from "../../src/engines/sim/profiles.js";
import { runSimulation } from "../../src/sim/run.js";
import type { SimResult } from "../../src/sim/types.js";
import { tinyWorkload } from "./helpers.js";

const MAX_WAIT_MS = 1_000;
const NODES = 4;
const OVERLOAD_MS = 20_000;

/** Arrivals every `gapMs` on average until OVERLOAD_MS, then every 400 ms for 20 s more. */
function workload(gapMs: number) {
  const hot = tinyWorkload({
    seed: 4,
    requests: Math.round(OVERLOAD_MS / gapMs),
    topics: 16,
    prefix: 300,
    suffix: 40,
    arrival: "open-loop",
    gapMs,
  });
  const calm = tinyWorkload({
    seed: 5,
    requests: 50,
    topics: 16,
    prefix: 300,
    suffix: 40,
    arrival: "open-loop",
    gapMs: 400,
  });
  const last = hot.requests.at(-1)?.arrivalMs ?? 0;
  const requests = [
    ...hot.requests,
    ...calm.requests.map((r, i) => ({ ...r, id: `calm${i}`, arrivalMs: last + (r.arrivalMs ?? 0) })),
  ];
  return { ...hot, requests };
}

function run(gapMs: number, maxWaitMs: number, gossip?: "full"): SimResult {
  return runSimulation(
    {
      nodes: NODES,
      policy: DAEMON_NODE_DEFAULTS.policy,
      daemonConfig: true,
      ...(gossip ? { gossip } : {}),
      node: { maxWaitMs },
      commMs: 2,
      jitterMs: 0.5,
      pollMs: 500,
      profile: DEFAULT_PROFILE,
      capacityTokens: 3_000,
      seed: 3,
      checkInvariants: true,
    },
    workload(gapMs),
  );
}

describe("admission by expected wait", () => {
  // Several 4-node simulations: CPU, not waiting; on a busy 2-core machine they took over 60 s.
  it("sheds within 2 s of a 2× overload, bounds the admitted wait, recovers after", {
    timeout: 240_000,
  }, () => {
    // Capacity: what the cluster serves when it never sheds, per ms; arrivals at twice that.
    const overloadGapMs = (gossip?: "full") => {
      const served = run(5, 0, gossip).records.filter((x) => x.ok);
      return 1 / ((2 * served.length) / Math.max(...served.map((x) => x.endMs)));
    };
    const gapMs = overloadGapMs();
    const r = run(gapMs, MAX_WAIT_MS);
    expect(r.invariantViolations).toEqual([]);
    expect(r.totals.duplicateReplies).toBe(0);
    expect(r.totals.incorrect).toBe(0);
    // Refused at least once (a request is refused on arrival, at its origin or after its forwards).
    const refused = r.records.filter((x) => !x.ok || x.retries > 0);
    expect(refused.length).toBeGreaterThan(0);
    // Shedding starts within 2 s of the overload.
    expect(Math.min(...refused.map((x) => x.startMs))).toBeLessThan(2_000);
    // A refused client waits the 429's Retry-After (≥ 1 s) before each new try, as a real client does.
    for (const x of refused) expect(x.latencyMs, x.id).toBeGreaterThan(1_000 * x.retries - 1);
    expect(r.records.filter((x) => !x.ok).every((x) => x.latencyMs > 3_000 - 1)).toBe(true);
    // The admitted wait in a queue stays about the bound (plus one service time and the estimate's error).
    const ok = r.records.filter((x) => x.ok && x.startMs < OVERLOAD_MS);
    const p99 = (x: SimResult) => {
      const q = x.records
        .filter((y) => y.ok && y.startMs < OVERLOAD_MS)
        .map((y) => y.queueMs)
        .sort((a, b) => a - b);
      return q[Math.floor(0.99 * q.length)] as number;
    };
    expect(ok.length).toBeGreaterThan(0);
    // The same bound in both gossip modes: scuttlebutt's digests carry each member's queue depth, so a
    // busy peer does not read idle until its tree next changes.
    expect(p99(r)).toBeLessThan(3 * MAX_WAIT_MS);
    expect(p99(run(overloadGapMs("full"), MAX_WAIT_MS, "full"))).toBeLessThan(3 * MAX_WAIT_MS);
    // Without the bound, the same overload queues without limit.
    const flood = run(gapMs, 0);
    expect(Math.max(...flood.records.map((x) => x.queueMs))).toBeGreaterThan(5 * MAX_WAIT_MS);
    // Load stopped: within 10 s the queues have drained. A calm request waits at most a fraction of
    // the bound (another's run ending); its latency is then its own run, up to one uncached prompt's.
    const calm = r.records.filter((x) => x.id.startsWith("calm") && x.startMs > OVERLOAD_MS + 10_000);
    expect(calm.length).toBeGreaterThan(10);
    for (const x of calm) {
      expect(x.ok && x.retries === 0, x.id).toBe(true);
      expect(x.queueMs + x.networkMs, x.id).toBeLessThan(MAX_WAIT_MS / 2);
    }
  });
});
