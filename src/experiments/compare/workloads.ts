/**
 * The comparison's workloads, built identically in the main thread and in every worker from a small
 * description: closed loop = MMLU uniform (the paper's), open loop = MMLU with Zipf-skewed subjects
 * (s = ZIPF_S, questions repeat) arriving as a Poisson process at the run's rate.
 */
import { mmluWorkload } from "../../workload/mmlu-workload.js";
import { syntheticMmlu } from "../../workload/synthetic.js";
import type { Workload } from "../../workload/types.js";
import type { WorkloadSource } from "../workloads.js";
import { ZIPF_S } from "./grid.js";

export interface CompareWorkloadSpec {
  source: WorkloadSource;
  seed: number;
  closedRequests: number;
  openRequests: number;
  /** Every node runs with `freshPeerLoad` (peer-load.ts). */
  freshPeerLoad: boolean;
  /** cost-aware (and the oracle, which runs it) with `peerSpeed`. */
  peerSpeed: boolean;
}

export type CompareWorkloadKind =
  | { kind: "closed" }
  | { kind: "open"; rate: number }
  | { kind: "open-closed" };

const cache = new Map<string, Promise<Workload>>();

/**
 * `closed`: uniform, closed loop. `open`: Zipf, Poisson at `rate`. `open-closed`: the open-loop
 * schedule run closed loop (one request in flight), which measures the service time capacity is
 * derived from.
 */
export function compareWorkload(spec: CompareWorkloadSpec, w: CompareWorkloadKind): Promise<Workload> {
  const key = JSON.stringify([spec, w]);
  let p = cache.get(key);
  if (!p) {
    const choice =
      w.kind === "closed"
        ? { requests: spec.closedRequests }
        : {
            requests: spec.openRequests,
            skewed: { kind: "zipf" as const, s: ZIPF_S, repeats: true },
            ...(w.kind === "open" ? { openLoopRate: w.rate } : {}),
          };
    p =
      spec.source.kind === "mmlu"
        ? mmluWorkload({
            dir: spec.source.dir,
            seed: spec.seed,
            ...choice,
            ...(spec.source.cacheDir ? { cacheDir: spec.source.cacheDir } : {}),
          })
        : Promise.resolve(syntheticMmlu({ seed: spec.seed, scale: spec.source.scale, ...choice }));
    p.catch(() => cache.delete(key));
    cache.set(key, p);
  }
  return p;
}
