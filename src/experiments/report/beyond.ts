/** The report's runs beyond the paper: cost-aware routing, a constrained cache and an open loop. */

import { OPEN_LOOP_RATE, RUN } from "../grid.js";
import type { PaperResults, RunSummary } from "../results.js";
import { int, pct, sec, table } from "./format.js";
import { MMLU_SUBJECTS } from "./paper-quotes.js";

/** Cost-aware beside the paper's affinity rule at 2 and 200 ms (nothing when the grid did not run it). */
export function costAwareSection(get: (id: string) => RunSummary | undefined): string[] {
  const out: string[] = [];
  const base = get(RUN.uNo);
  const u200Run = get(RUN.u200);
  const c2 = get(RUN.uCost2);
  const c200 = get(RUN.uCost200);
  if (c2 || c200) {
    out.push(
      "**Beyond the paper — cost-aware routing** (`cost-aware`: forward only when the prefill a peer saves exceeds ",
    );
    out.push("the round trip and queue there, with costs each node learns from its own engine):");
    out.push("");
    out.push(
      table(
        ["Δcomm", "affinity (paper's rule)", "cost-aware", "no-route", "cost-aware forwarded"],
        (
          [
            ["2 ms", get(RUN.u2), c2],
            ["200 ms", u200Run, c200],
          ] as const
        ).map(([label, a, c]) => [
          label,
          sec(a?.meanLatencyS),
          sec(c?.meanLatencyS),
          sec(base?.meanLatencyS),
          pct(c?.forwardedShare),
        ]),
      ),
    );
    out.push("");
  }
  return out;
}

/** The paper's runs with each cache holding a fraction of the prefix working set. */
export function constrainedSection(r: PaperResults, get: (id: string) => RunSummary | undefined): string[] {
  const out: string[] = [];
  out.push(`## Beyond the paper — constrained cache (${int(r.capacities.constrained)} tokens per node)`);
  out.push("");
  out.push(
    `At the paper's memory every node can hold all ${MMLU_SUBJECTS} subject prefixes (${int(r.capacities.prefixWorkingSet)} tokens in all), ` +
      "so without routing the uniform workload is already near the ideal bound and routing has little to win. Here each " +
      `node caches ${Math.round(r.capacities.constrainedFraction * 100)}% of that prefix working set: the ${r.nodes} caches together hold every ` +
      "prefix only if routing partitions the subjects between nodes.",
  );
  out.push("");
  const cons = [
    { label: "uniform, no-route", id: RUN.uNoSmall },
    { label: "uniform, routed", id: RUN.u2Small },
    { label: "uniform, routed, Δcomm 200 ms", id: RUN.u200Small },
  ];
  out.push(
    table(
      [
        "configuration",
        "exp. hit",
        "act. hit",
        "ideal",
        "latency (s)",
        "p99 (s)",
        "hotspot",
        "evicted tokens",
      ],
      cons.map((c) => {
        const o = get(c.id);
        return [
          c.label,
          pct(o?.expectedHit),
          pct(o?.actualHit),
          pct(o?.idealHit),
          sec(o?.meanLatencyS),
          sec(o?.p99LatencyS),
          pct(o?.hotspotShare),
          o ? int(o.evictedTokens) : "—",
        ];
      }),
    ),
  );
  out.push("");
  return out;
}

/** Poisson arrivals, where a hotspot finally queues (nothing when the grid did not run it). */
export function openLoopSection(r: PaperResults, get: (id: string) => RunSummary | undefined): string[] {
  const w = r.workloads;
  const out: string[] = [];
  const base = get(RUN.uNo);
  const oNo = get(RUN.oNo);
  const o2 = get(RUN.o2);
  // Offered load: arrivals × mean service time (no-route, closed loop) ÷ nodes.
  const openLoad = base
    ? `${Math.round(((OPEN_LOOP_RATE * base.meanLatencyS) / r.nodes) * 100)}%`
    : "a fraction";
  if (oNo || o2) {
    out.push(`## Beyond the paper — open loop (Poisson arrivals, ${OPEN_LOOP_RATE} requests/s)`);
    out.push("");
    out.push(
      `The paper sends one request at a time, so a hotspot never queues. Here the first ${int(w["uniform-open"]?.requests ?? 0)} ` +
        `requests of a uniform schedule arrive as a Poisson process at ${OPEN_LOOP_RATE}/s (about ${openLoad} of what ${r.nodes} warm ` +
        "no-route nodes serve; cold caches make the first minutes far heavier), the paper's memory, Δcomm 2 ms, " +
        "Δpoll 500 ms, push-back (§3.2) at its default threshold. Routing now trades two effects: fewer cold prefills " +
        `(each subject is prefilled on one node instead of ${r.nodes}), and queueing at the node that owns the most traffic.`,
    );
    out.push("");
    out.push(
      table(
        [
          "configuration",
          "act. hit",
          "ideal",
          "mean (s)",
          "p50 (s)",
          "p99 (s)",
          "hotspot",
          "forwarded",
          "fallbacks",
        ],
        (
          [
            ["uniform, no-route", oNo],
            ["uniform, routed", o2],
          ] as const
        ).map(([label, x]) => {
          return [
            label,
            pct(x?.actualHit),
            pct(x?.idealHit),
            sec(x?.meanLatencyS),
            sec(x?.p50LatencyS),
            sec(x?.p99LatencyS),
            pct(x?.hotspotShare),
            pct(x?.forwardedShare),
            x ? int(x.fallbacks) : "—",
          ];
        }),
      ),
    );
    out.push("");
    if (oNo && o2) {
      const better = (a: number, b: number) => (a < b ? "lower" : "higher");
      out.push(
        `Routed vs no-route: mean ${sec(o2.meanLatencyS)} vs ${sec(oNo.meanLatencyS)} s (${better(o2.meanLatencyS, oNo.meanLatencyS)}), ` +
          `p99 ${sec(o2.p99LatencyS)} vs ${sec(oNo.p99LatencyS)} s (${better(o2.p99LatencyS, oNo.p99LatencyS)}), ` +
          `median ${sec(o2.p50LatencyS)} vs ${sec(oNo.p50LatencyS)} s (${better(o2.p50LatencyS, oNo.p50LatencyS)}); ` +
          `the busiest node served ${pct(o2.hotspotShare)}% of requests.`,
      );
      out.push("");
    }
  }
  return out;
}
