#!/usr/bin/env node
/**
 * Simulator speed: simulated requests per wall-clock (and CPU) second of the scale experiment's node
 * simulator cells (MMLU open loop, 2 requests/s per node, Δcomm 2 ms, cost-aware), each cell in a
 * fresh process. Several builds side by side: `--dist a/dist,b/dist` runs every cell on each build in
 * turn (a, b, a, b …), so a shared machine's load falls on both alike.
 *
 *   npm run build && node scripts/sim-speed.mjs --mmlu-dir DIR --nodes 64,256,1024 \
 *     --cells scuttlebutt,bounded --arrival-s 5 [--dist dist,/path/to/other/dist] [--heap]
 *
 * Cells: full, scuttlebutt, bounded (scuttlebutt --max-estimates 64), oracle. `--heap` adds the scale
 * probe (memory per node at 90% of the arrivals; it also observes spread and detection, as the
 * experiment does). Prints one JSON line per run and a table at the end.
 */
import { spawnSync } from "node:child_process";
import { resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  return i < 0 ? dflt : args[i + 1];
};

if (opt("child", undefined) !== undefined) {
  await child(JSON.parse(opt("child", "{}")));
} else {
  await parent();
}

async function parent() {
  const here = fileURLToPath(new URL(".", import.meta.url));
  const dists = opt("dist", resolve(here, "../dist")).split(",").map((d) => resolve(d));
  const nodes = opt("nodes", "64,256,1024").split(",").map(Number);
  const cells = opt("cells", "bounded").split(",");
  const arrivalS = Number(opt("arrival-s", "5"));
  const mmlu = opt("mmlu-dir", undefined);
  const heap = args.includes("--heap");
  if (!mmlu) throw new Error("--mmlu-dir is required");
  const rows = [];
  for (const n of nodes)
    for (const cell of cells)
      for (const dist of dists) {
        const spec = { dist, n, cell, arrivalS, mmlu, heap };
        const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url), "--child", JSON.stringify(spec)], {
          encoding: "utf8",
          maxBuffer: 1 << 24,
        });
        if (r.status !== 0) throw new Error(`run ${JSON.stringify(spec)} failed:\n${r.stderr}`);
        const row = JSON.parse(r.stdout.trim().split("\n").pop());
        console.log(JSON.stringify(row));
        rows.push(row);
      }
  console.log(
    "\n| build | cell | N | requests | virtual s | wall s | CPU s | requests / wall s | requests / CPU s | heap / node |",
  );
  console.log("|---|---|---|---|---|---|---|---|---|---|");
  for (const r of rows)
    console.log(
      `| ${r.dist} | ${r.cell} | ${r.n} | ${r.requests} | ${r.virtualS.toFixed(1)} | ${r.wallS.toFixed(1)} | ${r.cpuS.toFixed(1)} | ${(r.requests / r.wallS).toFixed(1)} | ${(r.requests / r.cpuS).toFixed(1)} | ${r.heapMB === undefined ? "—" : `${r.heapMB.toFixed(2)} MB`} |`,
    );
}

async function child(s) {
  const imp = (p) => import(pathToFileURL(`${s.dist}/${p}`).href);
  const { executeCell, simConfigOf } = await imp("experiments/scale/execute.js");
  const { runSimulation } = await imp("sim/run.js");
  const { mmluWorkload } = await imp("workload/mmlu-workload.js");
  const rate = 2 * s.n;
  const w = await mmluWorkload({ dir: s.mmlu, seed: 1, requests: Math.round(rate * s.arrivalS), openLoopRate: rate });
  const spec = {
    kind: s.cell === "bounded" ? "bounded" : s.cell === "oracle" ? "oracle" : "main",
    mode: s.cell === "full" || s.cell === "oracle" ? "full" : "scuttlebutt",
    nodes: s.n,
    loss: 0,
    seed: 1,
    arrivalS: s.arrivalS,
    ...(s.cell === "bounded" ? { maxEstimates: 64 } : {}),
  };
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  let virtualS;
  let hit;
  let heapMB;
  if (s.heap) {
    const c = executeCell(spec, w);
    virtualS = c.virtualS;
    hit = c.hit;
    heapMB = c.heapPerNodeBytes === undefined ? undefined : c.heapPerNodeBytes / 1e6;
  } else {
    const r = runSimulation(simConfigOf(spec), w);
    virtualS = r.virtualMs / 1000;
    hit = r.totals.actualHitRate;
  }
  const cpu = process.cpuUsage(c0);
  console.log(
    JSON.stringify({
      dist: s.dist,
      cell: s.cell,
      n: s.n,
      requests: w.requests.length,
      virtualS,
      wallS: (performance.now() - t0) / 1000,
      cpuS: (cpu.user + cpu.system) / 1e6,
      hit,
      ...(heapMB === undefined ? {} : { heapMB }),
    }),
  );
}
