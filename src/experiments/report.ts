/**
 * report.md: every table as paper / ours / ratio, the ideal hit rate beside every hit rate, and each
 * of the paper's qualitative findings checked against our numbers, with the reason for any gap.
 * Generated only: never edit the output by hand.
 */

import { constrainedSection, costAwareSection, openLoopSection } from "./report/beyond.js";
import { findings } from "./report/findings.js";
import { table1Section, table2Section, table3Section } from "./report/paper-tables.js";
import { introSection, setupSection } from "./report/setup.js";
import type { PaperResults, RunSummary } from "./results.js";

export function writeReport(r: PaperResults, figures: string[]): string {
  const byId = new Map(r.runs.map((x) => [x.id, x]));
  const get = (id: string): RunSummary | undefined => byId.get(id);
  const out: string[] = [];

  out.push(...introSection(r));
  out.push(...setupSection(r));
  out.push(...table1Section(r, get));
  out.push(...costAwareSection(get));
  out.push(...table2Section(get));
  out.push(...table3Section(r, get));
  out.push(...constrainedSection(r, get));
  out.push(...openLoopSection(r, get));

  // ---- figures
  out.push("## Figures");
  out.push("");
  const captions: Record<string, string> = {
    figure2:
      "Figure 2 — mean latency vs Δcomm, routed vs no-route, ours (solid, circles) beside the paper's (dashed, squares); cost-aware (ours only, where the grid runs it).",
    figure3: `Figure 3 — per-node share of two subjects' requests over time (${r.figure3.subjects.join(", ")}), in the paper's four configurations.`,
    figure4: `Figure 4 — the specialization–eviction cycle (${r.figure4.subjects.join(", ")}: ${r.figure4.selection ?? ""}), zones shaded; with the paper's memory and with a constrained cache.`,
    hotspots: "Table 3 as a chart.",
    hitrates: "Actual hit rate beside the ideal bound (and the paper's).",
  };
  for (const f of figures) {
    out.push(`**${captions[f] ?? f}**`);
    out.push("");
    out.push(`![${f}](${f}.png) ([SVG](${f}.svg))`);
    out.push("");
  }

  // ---- findings
  out.push("## The paper's findings, checked");
  out.push("");
  out.push(...findings(r, get));
  out.push("");
  return `${out.join("\n")}\n`;
}
