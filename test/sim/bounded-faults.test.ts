/**
 * Fault schedules with `--max-estimates` (gossip scuttlebutt, where owners push their changes to
 * their holders, gossip/holders.ts): the same checks as daemon-faults.test.ts — every request
 * answered exactly once and correctly, tree = engine cache, estimates never regress, and every held
 * estimate equal to its owner's tree once the faults are over — with fewer estimates than peers.
 * Replay one seed with SIM_SEED=<seed>.
 */
import { describe, expect, it } from "vitest";
import { faultFlags } from "../../src/sim/fault-schedule.js";
import { runSimulation } from "../../src/sim/run.js";
import { assembleWorkload } from "../../src/workload/assemble.js";
import { syntheticPool } from "../../src/workload/synthetic.js";
import { daemonFaultConfig, runProblems, seedChunks } from "./helpers.js";

const ONLY = process.env.SIM_SEED === undefined ? undefined : Number(process.env.SIM_SEED);
const SEEDS = process.env.SOAK !== undefined ? 1_000 : 60;
const REQUESTS = 32;
const pool = syntheticPool({ subjects: 8, scale: 0.05 });

function runSeeds(seeds: number[]): void {
  const failures: string[] = [];
  let answered = 0;
  for (const seed of seeds) {
    // 5 to 7 nodes holding at most 2 or 3 estimates each: the bound always binds.
    const nodes = 5 + (seed % 3);
    const maxEstimates = 2 + (seed % 2);
    const w = assembleWorkload("synthetic", "synthetic", pool, {
      seed,
      requests: REQUESTS,
      skewed: seed % 2 === 0,
      openLoopRate: 2 + (seed % 3),
    });
    const r = runSimulation(
      {
        ...daemonFaultConfig(seed, nodes, 12_000),
        gossip: "scuttlebutt",
        maxEstimates,
        settleMs: 90_000,
      },
      w,
    );
    answered += r.totals.answered;
    const bad = runProblems(r, w.requests.length);
    if (bad !== undefined)
      failures.push(
        `seed ${seed} (${nodes} nodes, --max-estimates ${maxEstimates}): ${bad}\n    faults: ${faultFlags(r.config.faults).join(" ")}`,
      );
  }
  expect(failures, `replay one with SIM_SEED=<seed>\n${failures.join("\n")}`).toEqual([]);
  expect(answered).toBeGreaterThan(seeds.length * REQUESTS * 0.9);
}

describe(`gossip scuttlebutt with --max-estimates under ${SEEDS} seeded fault schedules`, () => {
  for (const chunk of ONLY === undefined ? seedChunks(SEEDS, 20) : [[ONLY]])
    it(
      `seeds ${chunk[0]}–${chunk.at(-1)}: answered once and correctly; tree = cache; estimates never regress; convergence`,
      () => runSeeds(chunk),
      300_000,
    );
});
