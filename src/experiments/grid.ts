/**
 * The paper's experiment grid (§5) plus what it leaves out: every configuration the tables and
 * figures need, each run once. Δcomm is "fixed + small jitter" (§4): ±0.5 ms at 2 ms (the paper's
 * "2 ± 0.5 ms"), and ±2.5% of Δcomm above that (the paper does not give it).
 */
import type { PolicyName } from "../core/node/policies/index.js";

export type WorkloadKind = "uniform" | "skewed" | "skewed-norepeat" | "uniform-open";

/**
 * Open-loop arrivals (beyond the paper, whose loop is closed): Poisson at this rate, about 40% of what
 * four warm no-route nodes serve at ~0.32 s per request (cold caches make the first minutes much
 * heavier); at 6/s push-back already switches most routing off. A prefix of the uniform schedule keeps
 * the run short.
 */
export const OPEN_LOOP_RATE = 5;
export const OPEN_LOOP_REQUESTS = 4000;
export type CapacityKind = "paper" | "constrained";

export interface ExperimentRun {
  id: string;
  label: string;
  workload: WorkloadKind;
  policy: PolicyName;
  commMs: number;
  jitterMs: number;
  pollMs: number;
  capacity: CapacityKind;
  /** Keep per-request served node (for the share-over-time figures). */
  timeline: boolean;
}

export function jitterFor(commMs: number): number {
  return commMs <= 2 ? 0.5 : commMs * 0.025;
}

function run(
  workload: WorkloadKind,
  policy: PolicyName,
  commMs: number,
  pollMs: number,
  capacity: CapacityKind = "paper",
  timeline = false,
): ExperimentRun {
  const route = policy === "local" ? "no-route" : policy === "affinity" ? "routed" : `routed (${policy})`;
  const cap = capacity === "paper" ? "" : ", constrained cache";
  const id = `${workload}-${policy}-c${commMs}-p${pollMs}${capacity === "paper" ? "" : "-small"}`;
  const poll = pollMs >= 1000 ? `${pollMs / 1000} s` : `${pollMs} ms`;
  return {
    id,
    label: `${workload}, ${route}, Δcomm ${commMs} ms, Δpoll ${poll}${cap}`,
    workload,
    policy,
    commMs,
    jitterMs: jitterFor(commMs),
    pollMs,
    capacity,
    timeline,
  };
}

/** Run ids the report refers to by role. */
export const RUN = {
  uNo: "uniform-local-c2-p500",
  u2: "uniform-affinity-c2-p500",
  u200: "uniform-affinity-c200-p500",
  u1000: "uniform-affinity-c1000-p500",
  uPoll20: "uniform-affinity-c2-p20",
  uPoll100: "uniform-affinity-c2-p100",
  uPoll2000: "uniform-affinity-c2-p2000",
  uPoll300k: "uniform-affinity-c2-p300000",
  sNo: "skewed-local-c2-p500",
  s2: "skewed-affinity-c2-p500",
  snNo: "skewed-norepeat-local-c2-p500",
  sn2: "skewed-norepeat-affinity-c2-p500",
  uNoSmall: "uniform-local-c2-p500-small",
  u2Small: "uniform-affinity-c2-p500-small",
  u200Small: "uniform-affinity-c200-p500-small",
  oNo: "uniform-open-local-c2-p500",
  o2: "uniform-open-affinity-c2-p500",
  uArg: "uniform-affinity-argmax-c2-p500",
  uArgPoll300k: "uniform-affinity-argmax-c2-p300000",
  sArg: "skewed-affinity-argmax-c2-p500",
  uCost2: "uniform-cost-aware-c2-p500",
  uCost200: "uniform-cost-aware-c200-p500",
} as const;

export function paperGrid(): ExperimentRun[] {
  return [
    // Tables 1-3 at the paper's memory. No-route never forwards, so one baseline per workload
    // serves every Δcomm (the paper pairs the same 0.323 s with all three).
    run("uniform", "local", 2, 500, "paper", true),
    run("uniform", "affinity", 2, 500, "paper", true),
    run("uniform", "affinity", 200, 500, "paper", true),
    run("uniform", "affinity", 1000, 500),
    run("uniform", "affinity", 2, 20),
    run("uniform", "affinity", 2, 100),
    run("uniform", "affinity", 2, 2000),
    run("uniform", "affinity", 2, 300_000, "paper", true),
    run("skewed", "local", 2, 500),
    run("skewed", "affinity", 2, 500, "paper", true),
    // The skew variant without repeated questions (prefix sharing only).
    run("skewed-norepeat", "local", 2, 500),
    run("skewed-norepeat", "affinity", 2, 500),
    // Beyond the paper: caches too small for the working set, where routing decides the hit rate.
    run("uniform", "local", 2, 500, "constrained", true),
    run("uniform", "affinity", 2, 500, "constrained", true),
    run("uniform", "affinity", 200, 500, "constrained", true),
    // Beyond the paper: open-loop Poisson arrivals, where a hotspot means queueing (and push-back).
    run("uniform-open", "local", 2, 500),
    run("uniform-open", "affinity", 2, 500),
    // Ablations with the simulator's other policies: Algorithm 1's argmax taken literally (ties to the
    // lowest id, not to self) — how much of the paper's hotspot share that tie rule explains — and
    // cost-aware routing (forward only when the saved prefill beats the round trip).
    run("uniform", "affinity-argmax", 2, 500),
    run("uniform", "affinity-argmax", 2, 300_000),
    run("skewed", "affinity-argmax", 2, 500),
    run("uniform", "cost-aware", 2, 500),
    run("uniform", "cost-aware", 200, 500),
  ];
}

/** A few runs for tests and quick looks: one of each kind the report needs, nothing else. */
export function smallGrid(): ExperimentRun[] {
  const ids = new Set<string>([RUN.uNo, RUN.u2, RUN.u200, RUN.sNo, RUN.s2, RUN.u2Small, RUN.uNoSmall]);
  return paperGrid().filter((r) => ids.has(r.id));
}
