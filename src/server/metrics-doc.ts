/**
 * The metrics table of docs/operations.md, made from the registry a node builds (src/server/metrics.ts,
 * prom-client's process and Node.js metrics included): each metric's name, type, labels and meaning.
 * `npm run docs:metrics` writes it between its markers; a test fails when the committed table and this
 * output differ, so the reference cannot drift from the code. The rest of the page is written by hand.
 */
import { createMetrics } from "./metrics.js";

/** Where the table lives, from the repository root. */
export const OPERATIONS_DOC = "docs/operations.md";
export const TABLE_BEGIN =
  "<!-- metrics table: generated from src/server/metrics.ts by `npm run docs:metrics`; do not edit -->";
export const TABLE_END = "<!-- end of metrics table -->";

const cell = (s: string) => s.replace(/\|/g, "\\|").replace(/\n/g, " ");

/** The table's markdown (without its markers). */
export async function renderMetricsTable(): Promise<string> {
  // With the series only some nodes have (following KV events, --tls-dir): the table lists every metric
  // a node can show.
  const m = createMetrics("doc", { kvEvents: true, tlsNotAfter: { ca: 0, node: 0 } });
  const registry = m.registry;
  const labels = new Map<string, readonly string[]>(
    registry.getMetricsAsArray().map((x) => {
      const names = (x as unknown as { labelNames?: readonly string[] }).labelNames ?? [];
      return [(x as unknown as { name: string }).name, names];
    }),
  );
  const rows = (await registry.getMetricsAsJSON()).map((x) => {
    const l = (labels.get(x.name) ?? []).map((n) => `\`${n}\``).join(", ");
    return `| \`${x.name}\` | ${x.type} | ${l} | ${cell(x.help)} |`;
  });
  return [
    "Every metric also carries the label `node` (the node's id).",
    "",
    "| Metric | Type | Labels | Meaning |",
    "| --- | --- | --- | --- |",
    ...rows,
  ].join("\n");
}

/** `doc` with the text between its markers replaced by the table; throws if the markers are missing. */
export async function withMetricsTable(doc: string): Promise<string> {
  const begin = doc.indexOf(TABLE_BEGIN);
  const end = doc.indexOf(TABLE_END);
  if (begin < 0 || end < begin) throw new Error(`${OPERATIONS_DOC} lacks the metrics table's markers`);
  return `${doc.slice(0, begin + TABLE_BEGIN.length)}\n${await renderMetricsTable()}\n${doc.slice(end)}`;
}
