/**
 * Vega-Lite specs for the paper's figures (and two summary charts), built from the grid's results.
 */
import type { TopLevelSpec } from "vega-lite";
import type { ShareWindow, ZoneSegment } from "./analysis.js";

const SCHEMA = "https://vega.github.io/schema/vega-lite/v6.json";

/** One color per source across every bar chart: the paper orange, ours blue, the ideal bound grey. */
const SOURCE_ORDER = ["paper", "paper (actual)", "ours", "ours (actual)", "ideal bound"];
const SOURCE_COLORS = ["#f58518", "#f58518", "#4c78a8", "#4c78a8", "#9d9d9d"];

export interface LatencyPoint {
  commMs: number;
  latencyS: number;
  policy: "routed" | "no-route" | "cost-aware";
  source: "ours" | "paper";
}

/** Figure 2's series in legend order: one hue per policy, solid + circles for ours, dashed + squares for the paper's. */
const FIG2_SERIES = [
  { policy: "routed", source: "ours", color: "#4c78a8" },
  { policy: "routed", source: "paper", color: "#4c78a8" },
  { policy: "no-route", source: "ours", color: "#f58518" },
  { policy: "no-route", source: "paper", color: "#f58518" },
  { policy: "cost-aware", source: "ours", color: "#54a24b" },
  { policy: "cost-aware", source: "paper", color: "#54a24b" },
] as const;

const seriesLabel = (policy: string, source: string) =>
  `${policy} — ${source === "ours" ? "ours (simulator)" : "paper"}`;

/**
 * Figure 2: mean latency vs Δcomm per policy, ours beside the paper's. Color, dash and point shape
 * all encode one `series` field, so the single legend names each line as ours or the paper's.
 */
export function figure2(points: LatencyPoint[], subtitle: string): TopLevelSpec {
  const present = FIG2_SERIES.filter((s) =>
    points.some((p) => p.policy === s.policy && p.source === s.source),
  );
  const domain = present.map((s) => seriesLabel(s.policy, s.source));
  const scale = (range: unknown[]) => ({ domain, range });
  return {
    $schema: SCHEMA,
    title: { text: "Figure 2: mean latency vs Δcomm (uniform MMLU)", subtitle },
    width: 420,
    height: 260,
    data: { values: points.map((p) => ({ ...p, series: seriesLabel(p.policy, p.source) })) },
    mark: { type: "line", point: true },
    encoding: {
      x: {
        field: "commMs",
        type: "quantitative",
        scale: { type: "log" },
        title: "Δcomm (ms, log scale)",
        axis: { values: [2, 10, 50, 200, 1000] },
      },
      y: { field: "latencyS", type: "quantitative", title: "mean latency per request (s)" },
      color: {
        field: "series",
        type: "nominal",
        title: "policy — source",
        scale: scale(present.map((s) => s.color)),
        legend: { labelLimit: 300, symbolStrokeWidth: 2 },
      },
      strokeDash: {
        field: "series",
        type: "nominal",
        scale: scale(present.map((s) => (s.source === "ours" ? [1, 0] : [6, 4]))),
      },
      shape: {
        field: "series",
        type: "nominal",
        scale: scale(present.map((s) => (s.source === "ours" ? "circle" : "square"))),
      },
    },
  } as TopLevelSpec;
}

export interface SharePanel {
  /** Panel title (the configuration). */
  config: string;
  subject: string;
  windows: ShareWindow[];
  zones?: ZoneSegment[];
}

function shareRows(panels: SharePanel[]) {
  const rows: { config: string; subject: string; x: number; node: string; share: number }[] = [];
  for (const p of panels) {
    for (const w of p.windows) {
      w.shares.forEach((s, n) => {
        rows.push({ config: p.config, subject: p.subject, x: w.x, node: `node ${n}`, share: s * 100 });
      });
    }
  }
  return rows;
}

const ZONE_LABEL: Record<ZoneSegment["zone"], string> = {
  competitive: "zone 1: competitive",
  specialized: "zone 2: specialized",
  "re-dispersed": "zone 3: re-dispersed",
};

/**
 * Figures 3 and 4: per-node share (%) of a subject's requests over time, one panel per
 * (configuration, subject); zones shaded when given.
 */
export function shareFigure(
  title: string,
  subtitle: string,
  panels: SharePanel[],
  withZones: boolean,
): TopLevelSpec {
  const lines = {
    mark: { type: "line", strokeWidth: 1.5 },
    encoding: {
      x: {
        field: "x",
        type: "quantitative",
        title: "request index (end of 300-request window)",
        scale: { zero: false },
      },
      y: {
        field: "share",
        type: "quantitative",
        title: "share of subject's requests (%)",
        scale: { domain: [0, 100] },
      },
      color: { field: "node", type: "nominal", title: "served by", legend: { labelLimit: 300 } },
    },
  };
  const zoneRows = withZones
    ? panels.flatMap((p) =>
        (p.zones ?? []).map((z) => ({
          kind: "zone",
          config: p.config,
          subject: p.subject,
          from: z.from,
          to: z.to,
          zone: ZONE_LABEL[z.zone],
        })),
      )
    : [];
  const zoneLayer = {
    transform: [{ filter: "datum.kind === 'zone'" }],
    mark: { type: "rect", opacity: 0.18 },
    encoding: {
      x: { field: "from", type: "quantitative" },
      x2: { field: "to" },
      fill: {
        field: "zone",
        type: "nominal",
        title: "zone",
        legend: { labelLimit: 300 },
        scale: { domain: Object.values(ZONE_LABEL), range: ["#f2b701", "#3969ac", "#e73f74"] },
      },
    },
  };
  const lineLayer = { transform: [{ filter: "datum.kind === 'line'" }], ...lines };
  // One dataset for the facet (it partitions top-level data only); each layer filters its rows.
  const values = [...shareRows(panels).map((r) => ({ kind: "line", ...r })), ...zoneRows];
  return {
    $schema: SCHEMA,
    title: { text: title, subtitle },
    data: { values },
    facet: {
      row: { field: "config", type: "nominal", title: null, sort: [...new Set(panels.map((p) => p.config))] },
      column: { field: "subject", type: "nominal", title: null },
    },
    spec: { width: 300, height: 150, layer: withZones ? [zoneLayer, lineLayer] : [lineLayer] },
    resolve: { scale: { x: "independent" } },
  } as unknown as TopLevelSpec;
}

export interface BarRow {
  config: string;
  value: number;
  source: string;
}

/** Grouped bars (ours vs paper vs ideal) in percent, for hotspot and hit-rate summaries. */
export function barFigure(title: string, subtitle: string, yTitle: string, rows: BarRow[]): TopLevelSpec {
  const present = new Set(rows.map((r) => r.source));
  const domain = SOURCE_ORDER.filter((s) => present.has(s));
  const range = domain.map((s) => SOURCE_COLORS[SOURCE_ORDER.indexOf(s)]!);
  return {
    $schema: SCHEMA,
    title: { text: title, subtitle },
    data: { values: rows.map((r) => ({ ...r, value: r.value * 100 })) },
    width: { step: 14 },
    height: 240,
    mark: "bar",
    encoding: {
      x: {
        field: "config",
        type: "nominal",
        title: null,
        sort: null,
        axis: { labelAngle: -35, labelLimit: 400 },
      },
      xOffset: { field: "source", type: "nominal", sort: domain },
      y: { field: "value", type: "quantitative", title: yTitle },
      color: {
        field: "source",
        type: "nominal",
        title: null,
        scale: { domain, range },
        legend: { labelLimit: 300 },
      },
    },
  } as TopLevelSpec;
}
