/**
 * Content-based discovery under `--max-estimates` (gossip/summary.ts), in the daemon's configuration:
 * many topics, each a long shared prefix, and nodes that hold estimates of far fewer members than
 * there are topics. Without summaries a node routes a topic's request to a holder only when it
 * happens to hold one of that topic's few holders; with them it takes a holder its summary names.
 */
import { describe, expect, it } from "vitest";
import { runSimulation } from "../../src/sim/run.js";
import { daemonSimConfig, runProblems, tinyWorkload } from "./helpers.js";

const NODES = 16;
const MAX_ESTIMATES = 2;

function run(
  seed: number,
  extra: {
    maxEstimates?: number;
    oracle?: boolean;
    gossip?: "full" | "scuttlebutt";
    node?: { maxPeers: number };
  },
) {
  const w = tinyWorkload({ seed, requests: 240, topics: 12, prefix: 600, arrival: "open-loop", gapMs: 60 });
  const r = runSimulation(
    {
      ...daemonSimConfig(seed, NODES),
      capacityTokens: 40_000,
      checkInvariants: true,
      settleMs: 10_000,
      ...extra,
    },
    w,
  );
  expect(runProblems(r, w.requests.length)).toBeUndefined();
  return r.totals.actualHitRate;
}

describe(`${NODES} nodes holding ${MAX_ESTIMATES} estimates each, 12 topics`, () => {
  for (const seed of [1, 2, 3])
    it(`seed ${seed}: hit rate within 15% of the oracle's (summaries name each topic's holders)`, () => {
      const oracle = run(seed, { gossip: "full", oracle: true });
      const bounded = run(seed, { gossip: "scuttlebutt", maxEstimates: MAX_ESTIMATES });
      expect(oracle).toBeGreaterThan(0.5);
      expect(bounded).toBeGreaterThanOrEqual(0.85 * oracle);
    }, 120_000);
});

describe(`${NODES} nodes whose mesh outgrows maxPeers ${MAX_ESTIMATES} (no maxEstimates set)`, () => {
  for (const seed of [1, 2])
    it(`seed ${seed}: discovery is on, as under maxEstimates: hit rate within 15% of the oracle's`, () => {
      const oracle = run(seed, { gossip: "full", oracle: true });
      const outgrown = run(seed, { gossip: "scuttlebutt", node: { maxPeers: MAX_ESTIMATES } });
      expect(outgrown).toBeGreaterThanOrEqual(0.85 * oracle);
    }, 120_000);
});
