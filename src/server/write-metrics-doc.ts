/** `npm run docs:metrics`: rewrites the metrics table of docs/operations.md (src/server/metrics-doc.ts). */
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { OPERATIONS_DOC, withMetricsTable } from "./metrics-doc.js";

const path = fileURLToPath(new URL(`../../${OPERATIONS_DOC}`, import.meta.url));
writeFileSync(path, await withMetricsTable(readFileSync(path, "utf8")));
process.stdout.write(`wrote the metrics table of ${path}\n`);
