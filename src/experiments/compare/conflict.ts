/**
 * Where targets 1 and 2 pull apart (issue 17): at a long Δcomm every remote hit costs a round trip,
 * so a latency-optimal router forgoes the ones that save less prefill than that — the oracle (cost-
 * aware with perfect estimates) does too. For each closed-loop cell where `cost-aware` misses the hit
 * target, this asks what reaching it would cost, from the measured runs alone: a router that routes a
 * share λ of requests as a policy that does reach it (affinity or centralized) and the rest as
 * cost-aware gets, to first order, hit = (1 − λ)·h_ca + λ·h_p and mean = (1 − λ)·m_ca + λ·m_p.
 * The cheapest such mix at 0.95 × centralized's hit rate against target 1's bound says whether the two
 * targets conflict in that cell, or cost-aware merely falls short of a mix that meets both.
 */
import type { CompareResult } from "./execute.js";
import type { CompareRun } from "./grid.js";
import { pct, type Row, resultOf, s3 } from "./rows.js";

/** Policies whose routing a mix may borrow to raise the hit rate. */
const DONORS = ["affinity", "centralized"] as const;

export interface MixEstimate {
  donor: string;
  /** Share of requests routed as the donor. */
  share: number;
  /** Estimated mean latency of the mix, s. */
  meanS: number;
}

/** The cheapest mix reaching `targetHit`, or undefined when no donor reaches it. */
export function cheapestMix(
  ca: CompareResult,
  donors: readonly Row[],
  targetHit: number,
): MixEstimate | undefined {
  let best: MixEstimate | undefined;
  for (const d of donors) {
    const h = d.result.actualHit;
    if (h < targetHit) continue;
    const share =
      h === ca.actualHit ? 1 : Math.min(1, Math.max(0, (targetHit - ca.actualHit) / (h - ca.actualHit)));
    const meanS = ca.meanS + share * (d.result.meanS - ca.meanS);
    if (!best || meanS < best.meanS) best = { donor: d.run.policy, share, meanS };
  }
  return best;
}

/** The report's section: one row per closed-loop cell where cost-aware misses the hit target. */
export function conflictSection(closedCells: Row[][], label: (r: CompareRun) => string): string[] {
  const rows: string[] = [];
  let conflicts = 0;
  for (const cell of closedCells) {
    const g = (p: string) => resultOf(cell, p);
    const ca = g("cost-aware");
    const ce = g("centralized");
    const lo = g("local");
    const af = g("affinity");
    const or = g("oracle");
    if (!ca || !ce || !lo || !af || !or) continue;
    const target = 0.95 * ce.actualHit;
    if (ca.actualHit >= target) continue;
    const bound = 1.02 * Math.min(lo.meanS, af.meanS, or.meanS);
    const mix = cheapestMix(
      ca,
      cell.filter((r) => (DONORS as readonly string[]).includes(r.run.policy)),
      target,
    );
    const conflict = mix === undefined || mix.meanS > bound;
    if (conflict) conflicts++;
    rows.push(
      `| ${label(cell[0]!.run)} | ${pct(target)} | ${pct(ca.actualHit)} / ${s3(ca.meanS)} | ${pct(or.actualHit)} / ${s3(or.meanS)} | ${pct(ce.actualHit)} / ${s3(ce.meanS)} | ${pct(af.actualHit)} / ${s3(af.meanS)} | ${mix ? `${(100 * mix.share).toFixed(0)}% ${mix.donor}: ${s3(mix.meanS)}` : "—"} | ${s3(bound)} | ${conflict ? "**conflict**" : "no conflict: cost-aware falls short"} |`,
    );
  }
  if (rows.length === 0) return [];
  return [
    "#### Targets 1 and 2 against each other (closed loop)",
    "",
    "`centralized` pays Δcomm like every policy here: a forward is one message out and the answer one back " +
      "(2 × Δcomm), and it has no router hop (a router the clients reach over the same network would add " +
      "another round trip to every request, forwarded or not). At a long Δcomm a remote hit saves less than " +
      "that round trip unless the prefill it saves is longer: a latency-optimal router then serves locally and " +
      "its hit rate falls towards local's. The oracle (perfect estimates, the latency bound of target 1) does " +
      "so too. For each closed-loop cell where cost-aware misses the hit target: hit rate / mean latency (s) of " +
      "cost-aware, the oracle, centralized and affinity (measured), and the cheapest router that mixes " +
      "cost-aware with a policy reaching the target (a share λ routed as that policy; hit and mean estimated " +
      "linearly between the two measured runs, not run) against target 1's bound, 1.02 × min(local, " +
      "affinity, oracle). A conflict: reaching 0.95 × centralized's hit rate costs more latency than target 1 " +
      "allows, so no router meets both there.",
    "",
    "| cell | hit target | cost-aware | oracle | centralized | affinity | cheapest mix at the target | target 1 bound | verdict |",
    "|---|---|---|---|---|---|---|---|---|",
    ...rows,
    "",
    `${conflicts} of ${rows.length} such cells are a conflict between the targets.`,
    "",
  ];
}
