/**
 * Fault schedules in the configuration the daemon ships (DAEMON_NODE_DEFAULTS: cost-aware, answer
 * probes off, the 1 s ack floor; the daemon's Δpoll), one schedule per seed (faultScheduleFor): every
 * request answered exactly once and correctly, tree = engine cache, estimates never regress, and
 * every estimate equal to its owner's tree once the faults are over and k × Δpoll has passed.
 *
 * A failing seed prints its schedule as `prefixmesh sim` flags; replay it alone with
 *   SIM_SEED=<seed> npx vitest run test/sim/daemon-faults.test.ts
 * `npm run soak` (SOAK=1) runs many more seeds, with longer runs.
 */
import { describe, expect, it } from "vitest";
import { DAEMON_NODE_DEFAULTS, nodeConfigSchema } from "../../src/core/node/config.js";
import { faultFlags } from "../../src/sim/fault-schedule.js";
import { runSimulation } from "../../src/sim/run.js";
import type { SimConfig } from "../../src/sim/types.js";
import { assembleWorkload } from "../../src/workload/assemble.js";
import { syntheticPool } from "../../src/workload/synthetic.js";
import type { Workload } from "../../src/workload/types.js";
import { DAEMON_POLL_MS, daemonFaultConfig, runProblems, seedChunks } from "./helpers.js";

const SOAK = process.env.SOAK !== undefined;
const ONLY = process.env.SIM_SEED === undefined ? undefined : Number(process.env.SIM_SEED);
const SEEDS = SOAK ? 2_000 : 200;
/** Requests per run, and the virtual time the faults are drawn over (about the arrivals' span). */
const REQUESTS = SOAK ? 150 : 32;
const FAULT_WINDOW_MS = SOAK ? 50_000 : 12_000;
/**
 * The same schedules in the mode the daemon does not default to. Under `gossip: "scuttlebutt"` (SWIM +
 * digests) each run settles longer, whichever mode is the default: a member a partition had declared
 * dead rejoins through SWIM's reconnect, and a suspicion may outlive the faults by up to Lifeguard's
 * longest timeout. The full mesh converges within k × Δpoll.
 */
const GOSSIP_SEEDS = SOAK ? 2_000 : 200;
const GOSSIP_SETTLE_MS = 90_000;

/** The daemon's anti-entropy period and failure detector, as its settings default them. */
const POLL_MS = DAEMON_POLL_MS;
const SUSPECT_AFTER_POLLS = nodeConfigSchema.shape.suspectAfterPolls.def.defaultValue;

// MMLU-shaped prompts (the synthetic workload's subject shapes), few enough subjects that prefixes
// recur and a small cache that they evict each other. Built once: only the schedule varies by seed.
const pool = syntheticPool({ subjects: 8, scale: 0.05 });

function workloadFor(seed: number): Workload {
  return assembleWorkload("synthetic", "synthetic", pool, {
    seed,
    requests: REQUESTS,
    skewed: seed % 2 === 0,
    openLoopRate: 2 + (seed % 3),
  });
}

/** The daemon's mesh protocol, and the other one (selectable with --gossip): both are run. */
const DAEMON_GOSSIP = DAEMON_NODE_DEFAULTS.gossip as Gossip;
const OTHER_GOSSIP: Gossip = DAEMON_GOSSIP === "full" ? "scuttlebutt" : "full";
type Gossip = "full" | "scuttlebutt";

function configFor(seed: number, nodes: number, gossip: Gossip): SimConfig {
  const mesh = gossip === "full" ? { gossip } : { gossip, settleMs: GOSSIP_SETTLE_MS };
  return {
    ...daemonFaultConfig(seed, nodes, FAULT_WINDOW_MS),
    // Once faults stop, k × Δpoll (jitter included) must bring every estimate to its owner's tree.
    settleMs: SUSPECT_AFTER_POLLS * POLL_MS * 1.1 + 10,
    ...mesh,
  };
}

const chunks = ONLY === undefined ? seedChunks(SEEDS) : [[ONLY]];

describe(`the daemon's configuration (gossip ${DAEMON_GOSSIP}) under ${chunks.flat().length} seeded fault schedules`, () => {
  for (const seeds of chunks) {
    const name = `seeds ${seeds[0]}–${seeds.at(-1)}: every request answered once and correctly; tree = engine cache; estimates never regress; convergence after faults`;
    it(name, () => runSeeds(seeds, DAEMON_GOSSIP), SOAK ? 1_800_000 : 120_000);
  }
});

describe(`the daemon's configuration with gossip ${OTHER_GOSSIP} under ${GOSSIP_SEEDS} seeded fault schedules`, () => {
  const seeds = ONLY === undefined ? seedChunks(GOSSIP_SEEDS) : [[ONLY]];
  for (const chunk of seeds) {
    const name = `seeds ${chunk[0]}–${chunk.at(-1)}: answered once and correctly; tree = cache; estimates never regress; convergence`;
    it(name, () => runSeeds(chunk, OTHER_GOSSIP), SOAK ? 1_800_000 : 120_000);
  }
});

function runSeeds(seeds: number[], gossip: Gossip): void {
  const failures: string[] = [];
  let answered = 0;
  let fallbacks = 0;
  let forwards = 0;
  for (const seed of seeds) {
    const nodes = 3 + (seed % 3);
    const w = workloadFor(seed);
    const r = runSimulation(configFor(seed, nodes, gossip), w);
    answered += r.totals.answered;
    fallbacks += r.totals.fallbacks;
    forwards += r.totals.messages.forward?.count ?? 0;
    const bad = runProblems(r, w.requests.length);
    if (bad !== undefined) {
      failures.push(
        `seed ${seed} (${nodes} nodes, gossip ${gossip}): ${bad}\n    faults: ${faultFlags(r.config.faults).join(" ")}`,
      );
    }
  }
  expect(failures, `replay one with SIM_SEED=<seed>\n${failures.join("\n")}`).toEqual([]);
  // The schedules did bite: requests were forwarded, and faults made origins fall back.
  expect(answered).toBeGreaterThan(seeds.length * REQUESTS * 0.9);
  if (seeds.length > 1) {
    expect(forwards).toBeGreaterThan(seeds.length);
    expect(fallbacks).toBeGreaterThan(0);
  }
}
