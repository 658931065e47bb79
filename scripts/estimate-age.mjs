#!/usr/bin/env node
// The estimate age of live idle members under --gossip scuttlebutt (BENCHMARKS.md, "Estimate age of an
// idle member"): a simulated mesh in the daemon's configuration serves a light workload, then idles;
// every Δpoll each node's estimate age of every live member it holds is sampled. Prints, per N, the
// age's p50 / p99 / max in Δpoll and the share of samples over 10 Δpoll and over the documented
// threshold (docs/operations.md: 25 × Δpoll × max(live peers, fanout) ÷ (fanout × rounds per Δpoll)).
// Usage: npm run build && node scripts/estimate-age.mjs N ...   (env IDLE_S: idle seconds, default 60)
import { DAEMON_NODE_DEFAULTS, resolveNodeConfig } from "../dist/core/node/config.js";
import { Prng } from "../dist/core/prng.js";
import { DEFAULT_PROFILE } from "../dist/engines/sim/profiles.js";
import { runSimulation } from "../dist/sim/run.js";

const POLL_MS = 500;
const idleMs = 1_000 * Number(process.env.IDLE_S ?? 60);
const args = process.argv.slice(2).map(Number);
if (args.length === 0 || args.some((n) => !Number.isInteger(n) || n < 2)) {
  console.error("usage: node scripts/estimate-age.mjs N ...   (N ≥ 2)");
  process.exit(2);
}
const defaults = resolveNodeConfig({ id: "x", capacityTokens: 1, gossip: "scuttlebutt" });
const perPoll = defaults.gossipFanout * defaults.gossipRoundsPerPoll;

/** One request per node over the first second: 8 shared prefixes, each with a unique suffix. */
function workload(n) {
  const rng = new Prng(7);
  const requests = [];
  for (let i = 0; i < n; i++) {
    const t = i % 8;
    const token = (k) => (k < 64 ? 1 + t * 1000 + k : 60_000 + rng.int(40_000));
    const tokens = Uint32Array.from({ length: 96 }, (_, k) => token(k));
    requests.push({ id: `q${i}`, tokens, group: `t${t}`, maxTokens: 1, arrivalMs: (1_000 * i) / n });
  }
  return { name: "light", synthetic: true, requests, arrival: "open-loop" };
}

const q = (s, p) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
for (const n of args) {
  const wall = performance.now();
  const ages = [];
  const limit = (25 * POLL_MS * Math.max(n - 1, defaults.gossipFanout)) / perPoll;
  runSimulation(
    {
      nodes: n,
      policy: DAEMON_NODE_DEFAULTS.policy,
      daemonConfig: true,
      commMs: 2,
      jitterMs: 0.5,
      pollMs: POLL_MS,
      profile: DEFAULT_PROFILE,
      seed: 1,
      gossip: "scuttlebutt",
      settleMs: idleMs,
      keepRecords: false,
    },
    workload(n),
    {
      probe: {
        everyMs: POLL_MS,
        // From 20 Δpoll after the last arrival: the load's last states have spread.
        fromMs: 1_000 + 20 * POLL_MS,
        observe(_now, nodes) {
          for (const node of nodes)
            for (const p of node?.peers() ?? [])
              if (p.liveness === "live" && p.estimateAgeMs !== undefined)
                ages.push(p.estimateAgeMs / POLL_MS);
        },
      },
    },
  );
  ages.sort((a, b) => a - b);
  const over = (x) => ages.filter((a) => a > x).length / ages.length;
  console.log(
    JSON.stringify({
      nodes: n,
      samples: ages.length,
      p50: +q(ages, 0.5).toFixed(2),
      p99: +q(ages, 0.99).toFixed(2),
      max: +(ages.at(-1) ?? 0).toFixed(2),
      over10: +over(10).toFixed(4),
      threshold: +(limit / POLL_MS).toFixed(2),
      overThreshold: over(limit / POLL_MS),
      wallS: +((performance.now() - wall) / 1_000).toFixed(1),
    }),
  );
}
