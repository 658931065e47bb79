import { readFileSync } from "node:fs";
import { describe, expect, test } from "vitest";
import { createMetrics } from "../../src/server/metrics.js";
import { OPERATIONS_DOC, withMetricsTable } from "../../src/server/metrics-doc.js";

// With the series only some nodes have (following KV events, --tls-dir): every metric some node exposes.
const every = () => createMetrics("A", { kvEvents: true, tlsNotAfter: { ca: 0, node: 0 } });

const committed = readFileSync(new URL(`../../${OPERATIONS_DOC}`, import.meta.url), "utf8");

describe("docs/operations.md's metrics table, generated from the registry", () => {
  test("the committed table is what the registry generates (else: npm run docs:metrics)", async () => {
    expect(committed).toBe(await withMetricsTable(committed));
  });

  test("has a row with the type of every metric a node exposes", async () => {
    const metrics = await every().registry.getMetricsAsJSON();
    expect(metrics.length).toBeGreaterThan(20);
    for (const m of metrics) {
      const row = committed.split("\n").find((l) => l.startsWith(`| \`${m.name}\` |`));
      expect(row, m.name).toBeDefined();
      expect(row, m.name).toContain(`| ${m.type} |`);
    }
  });

  test("the hand-written rows name only metrics that exist", async () => {
    const names = new Set((await every().registry.getMetricsAsJSON()).map((m) => m.name));
    const table = committed.indexOf("<!-- end of metrics table -->");
    const prose = committed.slice(table);
    const named = [...prose.matchAll(/\b((?:prefixmesh|process|nodejs)_[a-z0-9_]+)/g)].map(
      (m) => m[1] as string,
    );
    expect(named.length).toBeGreaterThan(10);
    // A histogram's series are its name + _bucket, _sum or _count.
    for (const n of named) expect(names, n).toContain(n.replace(/_(bucket|sum|count)$/, ""));
  });
});
