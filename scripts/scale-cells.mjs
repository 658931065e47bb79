#!/usr/bin/env node
// Chosen node-simulator cells of `experiment scale` (its setting, seed and workload: MMLU open loop,
// 2 req/s per node, Δcomm 2 ms, Δpoll 500 ms, cost-aware, one node crashed half-way), without the
// rest of the grid, one JSON line each: hit rate overall and by arrival, formation, gossip bytes.
// Usage: npm run build && node scripts/scale-cells.mjs --mmlu-dir DIR [--arrival-s 5] [--parts] KIND:MODE:N[:M] ...
//   KIND main | oracle | loss | bounded; MODE full | scuttlebutt; M --max-estimates (bounded).
//   swim:N[:LOSS] is the experiment's SWIM-alone cell instead (formation, steady bytes, detection).
import { executeCell, hitFrom } from "../dist/experiments/scale/execute.js";
import { runMembershipCell } from "../dist/experiments/scale/membership.js";
import { mmluWorkload } from "../dist/workload/mmlu-workload.js";

const args = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = args.indexOf(name);
  if (i < 0) return fallback;
  const [, v] = args.splice(i, 2);
  return v;
};
const dir = flag("--mmlu-dir");
const arrivalS = Number(flag("--arrival-s", "5"));
// --parts: also the gossip bytes per node per second by part (src/sim/mesh-parts.ts).
const partsAt = args.indexOf("--parts");
const parts = partsAt >= 0;
if (parts) args.splice(partsAt, 1);
if ((!dir && args.some((a) => !a.startsWith("swim:"))) || args.length === 0) {
  console.error("usage: node scripts/scale-cells.mjs --mmlu-dir DIR [--arrival-s S] KIND:MODE:N[:M] ...");
  process.exit(2);
}
for (const spec of args) {
  if (spec.startsWith("swim:")) {
    const [, n, loss] = spec.split(":");
    const c = runMembershipCell(Number(n), Number(loss ?? 0), 1);
    const { nodes: _n, loss: _l, ...rest } = c;
    console.log(JSON.stringify({ spec, ...rest }));
    continue;
  }
  const [kind, mode, n, m] = spec.split(":");
  const nodes = Number(n);
  const w = await mmluWorkload({ dir, seed: 1, requests: Math.round(2 * nodes * arrivalS), openLoopRate: 2 * nodes });
  const loss = kind === "loss" ? 0.05 : 0;
  const c = executeCell({ kind, mode, nodes, loss, ...(m ? { maxEstimates: Number(m) } : {}), seed: 1, arrivalS, meshParts: parts }, w);
  const pct = (x) => (x === undefined ? null : +(100 * x).toFixed(2));
  const h = c.hitByArrival;
  console.log(
    JSON.stringify({
      spec,
      hit: pct(c.hit),
      hitFrom1s: pct(hitFrom(h, 1000)),
      hitFrom2s: pct(hitFrom(h, 2000)),
      hitBySecond: Array.from({ length: Math.ceil((h.prompt.length * h.bucketMs) / 1000) }, (_, s) => {
        const per = 1000 / h.bucketMs;
        let p = 0;
        let x = 0;
        for (let i = s * per; i < (s + 1) * per && i < h.prompt.length; i++) {
          p += h.prompt[i];
          x += h.hit[i];
        }
        return p > 0 ? +((100 * x) / p).toFixed(1) : null;
      }),
      formed99Ms: c.formed99AtMs ?? null,
      formedMs: c.formedAtMs ?? null,
      membersFormedMs: c.membersFormedAtMs ?? null,
      gossipBPerNodeS: Math.round(c.gossipBytesPerNodeS),
      steady: c.steady
        ? {
            fromMs: c.steady.fromMs,
            toMs: c.steady.toMs,
            gossipBPerNodeS: Math.round(c.steady.gossipBytesPerNodeS),
            membershipBPerNodeS: Math.round(c.steady.membershipBytesPerNodeS),
          }
        : null,
      membershipBPerNodeS: Math.round(c.membershipBytesPerNodeS),
      falseSuspicions: c.falseSuspicions,
      meanS: +c.meanS.toFixed(3),
      p99S: +c.p99S.toFixed(3),
      ...(c.meshParts
        ? {
            partsBPerNodeS: Object.fromEntries(
              Object.entries(c.meshParts)
                .sort((a, b) => b[1].bytes - a[1].bytes)
                .map(([k, v]) => [k, { b: +(v.bytes / c.nodes / c.virtualS).toFixed(1), n: +(v.count / c.nodes / c.virtualS).toFixed(2) }]),
            ),
          }
        : {}),
      ...(c.meshPartsSteady && c.steady
        ? {
            steadyPartsBPerNodeS: Object.fromEntries(
              Object.entries(c.meshPartsSteady)
                .sort((a, b) => b[1].bytes - a[1].bytes)
                .map(([k, v]) => {
                  const s = (c.steady.toMs - c.steady.fromMs) / 1000;
                  return [k, { b: +(v.bytes / c.nodes / s).toFixed(1), n: +(v.count / c.nodes / s).toFixed(2) }];
                }),
            ),
          }
        : {}),
      wallS: +(c.wallMs / 1000).toFixed(1),
      cpuS: +(c.cpuMs / 1000).toFixed(1),
    }),
  );
}
