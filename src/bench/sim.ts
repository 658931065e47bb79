/**
 * `npm run bench:sim`: simulator speed — simulated requests per wall-clock second.
 *  1. The paper's setting (4 nodes, closed loop, 14,042 synthetic MMLU-shaped requests) at
 *     Δpoll 500 ms and 20 ms, policies local and affinity.
 *  2. Scaling: 4, 16 and 64 nodes, open-loop Poisson arrivals at 2 requests/s per node (≈ 65% busy
 *     at the paper profile's ≈ 0.32 s per request), so virtual time and gossip volume stay realistic.
 * Prints a Markdown table (paste into BENCHMARKS.md, section "Simulator").
 */
import { cpus, loadavg } from "node:os";
import type { PolicyName } from "../core/node/policies/index.js";
import { DEFAULT_PROFILE } from "../engines/sim/profiles.js";
import { runSimulation } from "../sim/run.js";
import type { SimConfig } from "../sim/types.js";
import { syntheticMmlu } from "../workload/synthetic.js";

interface Row {
  name: string;
  nodes: number;
  policy: PolicyName;
  pollMs: number;
  arrival: string;
  requests: number;
  wallS: number;
  /** CPU seconds of this process (user + system): robust when other jobs share the machine. */
  cpuS: number;
  reqPerS: number;
  reqPerCpuS: number;
  events: number;
  messages: number;
  meanLatencyS: number;
}

function bench(name: string, cfg: SimConfig, openLoopRate?: number): Row {
  const w = syntheticMmlu({ seed: 1, openLoopRate, nodes: cfg.nodes });
  // One warm-up run on a slice so the JIT is hot, then the measured run.
  runSimulation(cfg, { ...w, requests: w.requests.slice(0, 500) });
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  const r = runSimulation({ ...cfg, keepRecords: false }, w);
  const wallS = (performance.now() - t0) / 1000;
  const c = process.cpuUsage(c0);
  const cpuS = (c.user + c.system) / 1e6;
  return {
    name,
    nodes: cfg.nodes,
    policy: cfg.policy,
    pollMs: cfg.pollMs,
    arrival: openLoopRate === undefined ? "closed" : `open ${openLoopRate}/s`,
    requests: r.totals.requests,
    wallS,
    cpuS,
    reqPerS: r.totals.requests / wallS,
    reqPerCpuS: r.totals.requests / cpuS,
    events: r.events,
    messages: r.totals.messagesTotal,
    meanLatencyS: r.totals.meanLatencyMs / 1000,
  };
}

// The paper's own setting: 4 nodes, affinity, Δcomm 2 ± 0.5 ms, Δpoll 500 ms, the profile's memory
// (the experiment grid's point "uniform-affinity-c2-p500").
const base: SimConfig = {
  nodes: 4,
  policy: "affinity",
  commMs: 2,
  jitterMs: 0.5,
  pollMs: 500,
  profile: DEFAULT_PROFILE,
  seed: 1,
};

const rows: Row[] = [];
const log = (r: Row): void => {
  rows.push(r);
  process.stderr.write(`${r.name}: ${r.reqPerS.toFixed(0)} req/s (${r.wallS.toFixed(2)} s)\n`);
};
log(bench("paper grid point, no routing", { ...base, policy: "local" }));
log(bench("paper grid point, affinity", base));
log(bench("paper grid point, affinity, Δpoll 20 ms", { ...base, pollMs: 20 }));
for (const nodes of [4, 16, 64]) {
  log(bench(`scaling, ${nodes} nodes`, { ...base, nodes }, 2 * nodes));
}

const cpu = cpus()[0]?.model ?? "unknown CPU";
console.log(
  `Machine: ${cpus().length} cores (${cpu}), Node ${process.version}. Command: \`npm run bench:sim\`.\n`,
);
console.log(
  `Load average at the end: ${loadavg()
    .map((x) => x.toFixed(1))
    .join(" / ")} (other jobs slow wall time; CPU time is the steadier figure).\n`,
);
console.log(
  "| run | nodes | policy | Δpoll | arrivals | requests | wall s | CPU s | req / wall s | req / CPU s | events | messages | mean latency s |",
);
console.log("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
for (const r of rows) {
  console.log(
    `| ${r.name} | ${r.nodes} | ${r.policy} | ${r.pollMs} ms | ${r.arrival} | ${r.requests} | ${r.wallS.toFixed(2)} | ${r.cpuS.toFixed(2)} | ${Math.round(r.reqPerS)} | ${Math.round(r.reqPerCpuS)} | ${r.events} | ${r.messages} | ${r.meanLatencyS.toFixed(3)} |`,
  );
}
