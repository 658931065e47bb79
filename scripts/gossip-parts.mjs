#!/usr/bin/env node
// Where Scuttlebutt's bytes go in the scale experiment's rounds model (every owner changing once a
// round; src/experiments/scale/rounds.ts), by part (src/sim/mesh-parts.ts): bytes per node per round.
// Usage: npm run build && node scripts/gossip-parts.mjs N[:M] ...   (M: --max-estimates)
import { runRoundsCell } from "../dist/experiments/scale/rounds.js";

const args = process.argv.slice(2);
if (args.length === 0) {
  console.error("usage: node scripts/gossip-parts.mjs N[:M] ...");
  process.exit(2);
}
for (const spec of args) {
  const [n, m] = spec.split(":").map(Number);
  const c = runRoundsCell(n, 1, m, true);
  const per = (x) => +(x / n / c.busyRounds).toFixed(1);
  const parts = Object.entries(c.busyParts ?? {})
    .sort((a, b) => b[1].bytes - a[1].bytes)
    .map(([k, v]) => [k, { b: per(v.bytes), n: per(v.count) }]);
  console.log(
    JSON.stringify({
      spec,
      busyBPerNodeRound: +c.busyBytesPerNodeRound.toFixed(1),
      current: +(100 * c.currentShare).toFixed(1),
      spread: [c.p50, c.p99, c.p100],
      oneChangeBPerNodeRound: +c.bytesPerNodeRound.toFixed(1),
      parts: Object.fromEntries(parts),
    }),
  );
}
