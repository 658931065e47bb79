/// <reference lib="dom" />
/**
 * The dashboard's charts: each a uPlot (loaded before the page's modules as a global) over the chart
 * points of series.ts, rebuilt when its series change (a member joins or leaves), else updated in
 * place. It also gives each node its colour, the same in the members table.
 */
import type uPlotT from "uplot";
import type { Point } from "./series.js";

const UPlot = (globalThis as unknown as { uPlot: typeof uPlotT }).uPlot;
const PALETTE = ["#2f6fdf", "#e5732b", "#2b9a4a", "#b23ab5", "#c9a227", "#1aa3b3", "#d6456c", "#6b5bd6"];

/**
 * A stable colour per node id: members take them in sorted order when first seen, so every node's
 * page gives a node the same colour; a node seen only later takes the next one.
 */
const colours = new Map<string, string>();
export function colourOf(id: string): string {
  let c = colours.get(id);
  if (!c) {
    c = PALETTE[colours.size % PALETTE.length] as string;
    colours.set(id, c);
  }
  return c;
}

/** What the charts draw: the history's points and the members this node sees now. */
interface ChartSource {
  points: readonly Point[];
  members: readonly string[];
}

interface SeriesDef {
  label: string;
  colour: string;
  value(p: Point): number | null;
  dash?: number[];
  width?: number;
}

interface Chart {
  figure: HTMLElement;
  plot?: uPlotT;
  key: string;
  defs: (src: ChartSource) => SeriesDef[];
  unit: string;
  range?: [number, number];
}

function chart(
  id: string,
  unit: string,
  defs: (src: ChartSource) => SeriesDef[],
  range?: [number, number],
): Chart {
  const figure = document.getElementById(id) as HTMLElement;
  return { figure, key: "", defs, unit, ...(range ? { range } : {}) };
}

/** Node ids in the share chart: every member, plus any node that served (it may have left since). */
function shareIds(src: ChartSource): string[] {
  const ids = new Set<string>(src.members);
  for (const p of src.points) for (const id of Object.keys(p.share)) ids.add(id);
  return [...ids].sort();
}

const charts: Chart[] = [
  chart(
    "chart-share",
    "%",
    // A member that served none of a window's requests has a 0% share of it (none: no window share).
    (src) =>
      shareIds(src).map((id) => ({
        label: id,
        colour: colourOf(id),
        value: (p) => p.share[id] ?? (Object.values(p.share).some((v) => v !== null) ? 0 : null),
      })),
    [0, 100],
  ),
  chart("chart-route", "req/s", () => [
    { label: "local", colour: "#2f6fdf", value: (p) => p.localPerSec },
    { label: "forwarded", colour: "#e5732b", value: (p) => p.forwardedPerSec },
  ]),
  chart(
    "chart-hit",
    "%",
    () => [
      // Actual first and wider, predicted dashed on top: where they agree, both stay visible.
      { label: "actual", colour: "#2b9a4a", value: (p) => p.actualHitPct, width: 4 },
      { label: "predicted", colour: "#6b5bd6", value: (p) => p.predictedHitPct, dash: [6, 4] },
    ],
    [0, 100],
  ),
  chart("chart-gossip", "B/s", () => [
    { label: "in", colour: "#1aa3b3", value: (p) => p.gossipInBytesPerSec },
    { label: "out", colour: "#b23ab5", value: (p) => p.gossipOutBytesPerSec },
  ]),
  chart("chart-latency", "ms", () => [
    { label: "p50", colour: "#2f6fdf", value: (p) => p.p50Ms },
    { label: "p99", colour: "#d6456c", value: (p) => p.p99Ms },
  ]),
];

function fmtAxis(v: number, unit: string): string {
  if (unit === "B/s") {
    if (v >= 1e6) return `${(v / 1e6).toFixed(1)} MB/s`;
    if (v >= 1e3) return `${(v / 1e3).toFixed(1)} kB/s`;
    return `${Math.round(v)} B/s`;
  }
  if (unit === "%") return `${Math.round(v)}%`;
  return `${Number(v.toPrecision(3))} ${unit}`;
}

function options(c: Chart, defs: SeriesDef[], width: number): uPlotT.Options {
  const fmt = (v: number | null) => (v == null ? "–" : fmtAxis(v, c.unit));
  return {
    width,
    height: 220,
    legend: { live: true },
    cursor: { drag: { x: false, y: false } },
    scales: {
      x: { time: true },
      y: c.range ? { range: c.range } : { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] },
    },
    axes: [{}, { size: 84, values: (_u, vals) => vals.map((v) => fmtAxis(v, c.unit)) }],
    series: [
      {},
      ...defs.map((d) => ({
        label: d.label,
        stroke: d.colour,
        width: d.width ?? 2,
        spanGaps: false,
        value: (_u: uPlotT, v: number | null) => fmt(v),
        ...(d.dash ? { dash: d.dash } : {}),
      })),
    ],
  };
}

/** Draws every chart from the points `pts`; `members`: this node and its peers, as it sees them now. */
export function drawCharts(pts: readonly Point[], members: readonly string[]): void {
  for (const c of charts) {
    const defs = c.defs({ points: pts, members });
    const data: uPlotT.AlignedData = [pts.map((p) => p.t), ...defs.map((d) => pts.map((p) => d.value(p)))];
    // For tests and scripts: how many points the chart holds, how many show something above 0, and
    // the newest value of each series (JSON, by label).
    c.figure.dataset.points = String(pts.length);
    c.figure.dataset.nonzero = String(pts.filter((p) => defs.some((d) => (d.value(p) ?? 0) > 0)).length);
    const newest = pts.at(-1);
    c.figure.dataset.latest = JSON.stringify(
      newest ? Object.fromEntries(defs.map((d) => [d.label, d.value(newest)])) : {},
    );
    const holder = c.figure.querySelector(".plot") as HTMLElement;
    const key = defs.map((d) => d.label).join("|");
    const width = Math.max(300, holder.clientWidth);
    if (!c.plot || c.key !== key) {
      c.plot?.destroy();
      holder.replaceChildren();
      c.plot = new UPlot(options(c, defs, width), data, holder);
      c.key = key;
    } else {
      if (Math.abs(c.plot.width - width) > 2) c.plot.setSize({ width, height: 220 });
      c.plot.setData(data);
    }
    // Without a cursor on the chart, its legend shows the newest values.
    const plot = c.plot;
    if (pts.length > 0 && (plot.cursor.left ?? -1) < 0) plot.setLegend({ idx: pts.length - 1 });
  }
}
