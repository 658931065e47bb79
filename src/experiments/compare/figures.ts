/** Vega-Lite specs of the comparison's figures. */
import type { TopLevelSpec } from "vega-lite";

const SCHEMA = "https://vega.github.io/schema/vega-lite/v6.json";

export interface PolicyPoint {
  policy: string;
  x: number;
  y: number;
  panel: string;
}

/** One line per policy over a numeric x, one panel per `panel` value (shared y scale per panel row). */
function lines(
  title: string,
  points: PolicyPoint[],
  order: readonly string[],
  x: { title: string; log: boolean; values: number[] },
  yTitle: string,
  yLog = false,
): TopLevelSpec {
  return {
    $schema: SCHEMA,
    title,
    data: { values: points },
    facet: { column: { field: "panel", type: "nominal", title: null } },
    spec: {
      width: 300,
      height: 230,
      mark: { type: "line", point: true },
      encoding: {
        x: {
          field: "x",
          type: "quantitative",
          title: x.title,
          scale: x.log ? { type: "log" } : { zero: false },
          axis: { values: x.values },
        },
        y: { field: "y", type: "quantitative", title: yTitle, scale: yLog ? { type: "log" } : {} },
        color: { field: "policy", type: "nominal", sort: [...order], title: "policy" },
        strokeDash: {
          field: "policy",
          type: "nominal",
          sort: [...order],
          // Baselines dashed: the centralized router and the oracle are references, not deployable.
          scale: {
            domain: [...order],
            range: order.map((p) => (p === "centralized" || p === "oracle" ? [5, 3] : [1, 0])),
          },
          legend: null,
        },
      },
    },
    resolve: { scale: { y: "independent" } },
  } as TopLevelSpec;
}

export function latencyVsComm(points: PolicyPoint[], order: readonly string[]): TopLevelSpec {
  return lines(
    "Mean latency vs Δcomm, closed loop, 4 nodes (dashed: centralized baseline and oracle)",
    points,
    order,
    { title: "Δcomm (ms, log scale)", log: true, values: [2, 20, 200, 1000] },
    "mean latency (s)",
  );
}

export function p99VsLoad(points: PolicyPoint[], order: readonly string[]): TopLevelSpec {
  return lines(
    "p99 latency vs offered load, open loop, Zipf subjects, Δcomm 2 ms",
    points,
    order,
    { title: "offered load (% of capacity)", log: false, values: [50, 80, 95, 120] },
    "p99 latency (s, log scale)",
    true,
  );
}

export interface HitBar {
  policy: string;
  panel: string;
  hit: number;
  ideal: number;
}

/** Actual hit rate per policy, with the workload's ideal as a rule: routing cannot beat it. */
export function hitVsIdeal(bars: HitBar[], order: readonly string[]): TopLevelSpec {
  return {
    $schema: SCHEMA,
    title: "Actual hit rate vs the ideal (grey rule), closed loop, 4 nodes, Δcomm 2 ms",
    data: { values: bars },
    facet: { column: { field: "panel", type: "nominal", title: null } },
    spec: {
      width: 300,
      height: 230,
      layer: [
        {
          mark: "bar",
          encoding: {
            x: { field: "policy", type: "nominal", sort: [...order], title: null },
            y: { field: "hit", type: "quantitative", title: "hit rate", scale: { domain: [0, 1] } },
            color: { field: "policy", type: "nominal", sort: [...order], legend: null },
          },
        },
        {
          mark: { type: "rule", color: "#777", strokeDash: [4, 3] },
          encoding: { y: { aggregate: "max", field: "ideal", type: "quantitative" } },
        },
      ],
    },
  } as TopLevelSpec;
}
