/** The scale report's figures as Vega-Lite specs, by file name: the series each plots, per N. */
import type { TopLevelSpec } from "vega-lite";
import type { NodeCell } from "./execute.js";
import { bytesVsN, convergenceVsN, detectionVsN, hitVsN, type SeriesPoint } from "./figures.js";
import { MODES, POLL_MS } from "./grid.js";
import { spreadMs } from "./report-format.js";
import type { ScaleOutcome } from "./run.js";

export function scaleFigures(o: ScaleOutcome): [string, TopLevelSpec][] {
  const figs: [string, TopLevelSpec][] = [];
  const pts = (
    fn: (c: NodeCell) => number | undefined,
    kind: NodeCell["kind"],
    mode: string,
    label: string,
  ): SeriesPoint[] =>
    o.cells
      .filter((c) => c.kind === kind && c.mode === mode)
      .flatMap((c) => {
        const y = fn(c);
        return y === undefined || !(y > 0) ? [] : [{ series: label, nodes: c.nodes, y }];
      });
  figs.push([
    "bytes-vs-n",
    bytesVsN(
      [
        ...MODES.flatMap((m) => pts((c) => c.gossipBytesPerNodeS, "main", m, `${m}: all gossip`)),
        ...MODES.flatMap((m) => pts((c) => c.membershipBytesPerNodeS, "main", m, `${m}: membership only`)),
        ...pts(
          (c) => c.gossipBytesPerNodeS,
          "bounded",
          "scuttlebutt",
          `scuttlebutt, --max-estimates ${o.boundedEstimates}`,
        ),
        ...o.membership
          .filter((m) => m.loss === 0)
          .map((m) => ({ series: "SWIM alone, steady state", nodes: m.nodes, y: m.steadyBytesPerNodeS })),
      ],
      o.nodes,
    ),
  ]);
  figs.push([
    "convergence-vs-n",
    convergenceVsN(
      [
        ...MODES.flatMap((m) =>
          pts(
            (c) => {
              const v = spreadMs(c, "p100Ms");
              return v === undefined ? undefined : Math.max(v, 20) / 1000;
            },
            "main",
            m,
            `${m}: 100 % (node simulator)`,
          ),
        ),
        ...MODES.flatMap((m) =>
          pts(
            (c) => {
              const v = spreadMs(c, "p50Ms");
              return v === undefined ? undefined : Math.max(v, 20) / 1000;
            },
            "main",
            m,
            `${m}: 50 % (node simulator)`,
          ),
        ),
        ...o.rounds.flatMap((r) =>
          r.p100 === undefined
            ? []
            : [
                {
                  series: "Scuttlebutt alone: 100 % (rounds × Δpoll)",
                  nodes: r.nodes,
                  y: (r.p100 * POLL_MS) / 1000,
                },
              ],
        ),
      ],
      o.nodes,
    ),
  ]);
  figs.push([
    "detection-vs-n",
    detectionVsN(
      [
        ...pts(
          (c) => (c.detection?.firstMs === undefined ? undefined : Math.max(c.detection.firstMs, 1) / 1000),
          "main",
          "full",
          "full: first to suspect",
        ),
        ...pts(
          (c) => (c.detection?.lastMs === undefined ? undefined : c.detection.lastMs / 1000),
          "main",
          "full",
          "full: last to suspect",
        ),
        ...o.membership
          .filter((m) => m.loss === 0 && m.firstDeadMs !== undefined)
          .map((m) => ({ series: "SWIM: first dead", nodes: m.nodes, y: (m.firstDeadMs as number) / 1000 })),
        ...o.membership
          .filter((m) => m.loss === 0 && m.lastDeadMs !== undefined)
          .map((m) => ({ series: "SWIM: last dead", nodes: m.nodes, y: (m.lastDeadMs as number) / 1000 })),
        ...o.membership
          .filter((m) => m.loss === 0)
          .map((m) => ({ series: "memberlist bound", nodes: m.nodes, y: m.boundMs / 1000 })),
      ],
      o.nodes,
    ),
  ]);
  figs.push([
    "hit-vs-n",
    hitVsN(
      [
        ...MODES.flatMap((m) => pts((c) => c.hit, "main", m, m)),
        ...pts((c) => c.hit, "oracle", "full", "oracle (full mesh)"),
        ...pts((c) => c.ideal, "main", "scuttlebutt", "ideal bound"),
      ],
      o.nodes,
    ),
  ]);
  return figs;
}
