/** Vega-Lite specs of the scale report's figures: one line per series over N, log axes with units. */
import type { TopLevelSpec } from "vega-lite";

const SCHEMA = "https://vega.github.io/schema/vega-lite/v6.json";

export interface SeriesPoint {
  series: string;
  nodes: number;
  y: number;
}

function lines(
  title: string,
  points: SeriesPoint[],
  nodes: number[],
  yTitle: string,
  yLog: boolean,
): TopLevelSpec {
  return {
    $schema: SCHEMA,
    title,
    width: 420,
    height: 280,
    data: { values: points },
    mark: { type: "line", point: true },
    encoding: {
      x: {
        field: "nodes",
        type: "quantitative",
        title: "nodes N (log scale)",
        scale: { type: "log", base: 2 },
        axis: { values: nodes },
      },
      y: {
        field: "y",
        type: "quantitative",
        title: yTitle,
        scale: yLog ? { type: "log" } : { domain: [0, 1] },
      },
      color: {
        field: "series",
        type: "nominal",
        title: null,
        legend: { labelLimit: 0, orient: "bottom", columns: 2 },
      },
    },
  } as TopLevelSpec;
}

export const bytesVsN = (p: SeriesPoint[], n: number[]) =>
  lines(
    "Gossip traffic per node vs N (MMLU open loop, 2 req/s per node)",
    p,
    n,
    "bytes per node per second (log scale)",
    true,
  );

export const convergenceVsN = (p: SeriesPoint[], n: number[]) =>
  lines("Time for one change to reach every node vs N", p, n, "seconds (log scale)", true);

export const detectionVsN = (p: SeriesPoint[], n: number[]) =>
  lines("Crashed node: time until members notice it vs N", p, n, "seconds after the crash (log scale)", true);

export const hitVsN = (p: SeriesPoint[], n: number[]) =>
  lines(
    "Actual hit rate vs N beside the oracle and the ideal bound",
    p,
    n,
    "hit rate (share of prompt tokens)",
    false,
  );
