/**
 * `npm run bench`: every benchmark, one after another in child processes (so one's heap and JIT state
 * do not colour the next). The engine benchmark takes minutes on a CPU; it runs only with --engines.
 * Each prints its own side-by-side ratios; results go into BENCHMARKS.md with the command.
 */
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const benches = ["core.js", "sim.js", "router.js"];
if (process.argv.includes("--engines")) benches.push("engines.js");

let failed = 0;
for (const b of benches) {
  process.stdout.write(`\n=== ${b.replace(/\.js$/, "")} ===\n`);
  const r = spawnSync(process.execPath, [join(here, b)], { stdio: "inherit" });
  if (r.status !== 0) {
    failed++;
    process.stderr.write(`bench ${b} exited with ${r.status ?? r.signal}\n`);
  }
}
process.exit(failed === 0 ? 0 : 1);
