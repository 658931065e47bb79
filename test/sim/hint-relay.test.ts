/**
 * Relayed holder hints (gossip/hints.ts) in the daemon's configuration: 64 nodes that each hold
 * estimates of 4 members. One far member alone caches a long prefix; a few seconds later requests
 * sharing it enter at 24 other nodes. Summaries alone reach a node only from the members that gossiped
 * with it (about half of them by then); relayed hints name the holder to every node, so each of those
 * requests is routed to a node caching the prefix.
 */
import { describe, expect, it } from "vitest";
import { Prng } from "../../src/core/prng.js";
import { runSimulation } from "../../src/sim/run.js";
import type { Workload, WorkloadRequest } from "../../src/workload/types.js";
import { daemonSimConfig, runProblems } from "./helpers.js";

const NODES = 64;
const MAX_ESTIMATES = 4;
const PREFIX = 600;
const PROBES = 24;
const HOLDER = 37;

function workload(seed: number): Workload {
  const rng = new Prng(seed);
  const prefix = Array.from({ length: PREFIX }, (_, i) => 1 + ((i * 7919 + seed) % 50_000));
  const suffix = () => Array.from({ length: 24 }, () => 60_000 + rng.int(40_000));
  const requests: WorkloadRequest[] = [
    {
      id: "warm",
      tokens: Uint32Array.from([...prefix, ...suffix()]),
      group: "p",
      maxTokens: 1,
      entry: HOLDER,
      arrivalMs: 0,
    },
  ];
  // Entries spread over the cluster, the holder excluded; after the mesh formed and gossiped a while.
  for (let i = 0; i < PROBES; i++) {
    const entry = (HOLDER + 1 + Math.floor((i * (NODES - 1)) / PROBES)) % NODES;
    requests.push({
      id: `probe${i}`,
      tokens: Uint32Array.from([...prefix, ...suffix()]),
      group: "p",
      maxTokens: 1,
      entry,
      arrivalMs: 3_000 + 150 * i,
    });
  }
  return { name: "hint-relay", synthetic: true, requests, arrival: "open-loop" };
}

describe(`${NODES} nodes holding ${MAX_ESTIMATES} estimates each, one far holder of a prefix`, () => {
  for (const seed of [1, 2])
    it(`seed ${seed}: requests entering elsewhere are routed to a holder of the prefix`, () => {
      const w = workload(seed);
      const r = runSimulation(
        {
          ...daemonSimConfig(seed, NODES),
          gossip: "scuttlebutt",
          maxEstimates: MAX_ESTIMATES,
          checkInvariants: true,
          settleMs: 5_000,
        },
        w,
      );
      expect(runProblems(r, w.requests.length)).toBeUndefined();
      const probes = r.records.filter((x) => x.id.startsWith("probe"));
      expect(probes).toHaveLength(PROBES);
      // A holder's summary proves the prefix's 32nd block (512 tokens): a routed request hits that much.
      const routed = probes.filter((x) => x.actualHitTokens >= 512).length;
      expect(routed).toBeGreaterThanOrEqual(PROBES - 2);
    }, 120_000);
});
