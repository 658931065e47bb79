/**
 * Router overhead: the same request sent (1) straight to an engine endpoint, (2) through a node that
 * serves it locally, (3) through a node that forwards it to the peer holding its prefix (mTLS peer
 * hop, no injected delay). Every process is separate; the engine is the simulated one at zero cost,
 * so the differences are the router's own cost. Run: npm run build && node dist/bench/router.js
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { loadavg } from "node:os";
import { fileURLToPath } from "node:url";
import { Pool } from "undici";
import { startCluster } from "../server/cluster/launcher.js";

const N = Number(process.env.ROUTER_BENCH_N ?? 2000);
const WARMUP = 200;
const prompt = Array.from({ length: 540 }, (_, i) => `tok${i}`).join(" ");

/** Sequential requests through `url`; latencies after warm-up, sorted. Fails if the wrong node serves. */
async function measure(url: string, model: string, expectServedBy?: string, p = prompt): Promise<number[]> {
  const pool = new Pool(url, { connections: 1 });
  const body = JSON.stringify({ model, prompt: p, max_tokens: 1 });
  const lat: number[] = [];
  try {
    for (let i = 0; i < WARMUP + N; i++) {
      const t0 = performance.now();
      const res = await pool.request({
        method: "POST",
        path: "/v1/completions",
        headers: { "content-type": "application/json" },
        body,
      });
      const json = (await res.body.json()) as { prefixmesh?: { served_by?: string } };
      const dt = performance.now() - t0;
      if (res.statusCode !== 200) throw new Error(`${url}: HTTP ${res.statusCode}`);
      if (expectServedBy && json.prefixmesh?.served_by !== expectServedBy) {
        throw new Error(`expected served_by ${expectServedBy}, got ${json.prefixmesh?.served_by}`);
      }
      if (i >= WARMUP) lat.push(dt);
    }
  } finally {
    await pool.close();
  }
  return lat.sort((a, b) => a - b);
}

/** CPU time (user + system) a process has used so far, ms, from /proc (Linux); NaN elsewhere. */
function cpuMs(pid: number | undefined): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the parenthesised command name: utime and stime are the 12th and 13th.
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return ((Number(f[11]) + Number(f[12])) * 1000) / 100; // USER_HZ is 100 on Linux
  } catch {
    return Number.NaN;
  }
}

/** Runs `fn`, returning its latencies and the CPU ms per request spent by `pids` meanwhile. */
async function withCpu(pids: (number | undefined)[], fn: () => Promise<number[]>) {
  const before = pids.map(cpuMs);
  const lat = await fn();
  const cpu =
    pids.reduce<number>((sum, pid, i) => sum + cpuMs(pid) - (before[i] as number), 0) / (WARMUP + N);
  return { lat, cpu };
}

const q = (s: number[], p: number) => s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)] as number;

async function main() {
  const engineProc = spawn(
    process.execPath,
    [fileURLToPath(new URL("./engine-server.js", import.meta.url))],
    {
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  const engineUrl = await new Promise<string>((resolve) =>
    engineProc.stdout?.once("data", (d: Buffer) => resolve(d.toString().trim())),
  );
  // Two 2-node clusters, alike but for how forwards travel: one WebSocket channel per peer (the
  // default) vs one HTTP request per forward, measured side by side in this run.
  const base = {
    nodes: 2,
    host: "127.0.0.1",
    engine: "sim",
    model: "generated",
    simTimeScale: 0,
    logLevel: "warn",
    // Affinity forwards whenever the peer holds more of the prompt: this measures the forward's cost,
    // not a policy's judgment of whether it pays (cost-aware may rightly keep a zero-cost request local).
    policy: "affinity",
    // ROUTER_BENCH_SECRET=1: shared-secret (HMAC) peer auth instead of mTLS, to see what TLS costs.
    sharedSecret: process.env.ROUTER_BENCH_SECRET === "1",
  } as const;
  const cluster = await startCluster(base);
  const httpCluster = await startCluster({ ...base, extraArgs: ["--forward-transport", "http"] });
  try {
    const a = cluster.nodes[0] as (typeof cluster.nodes)[0];
    const model = ((await (await fetch(`${a.apiUrl}/v1/models`)).json()) as { data: { id: string }[] })
      .data[0]?.id as string;
    const direct = await withCpu([engineProc.pid], () => measure(engineUrl, model));
    // Local path: A holds the prompt after its first run; routing keeps it at A (ties go to self).
    const local = await withCpu([a.pid], () => measure(a.apiUrl, model, "A"));
    // Forward path: B gets a prompt A has never seen, A learns B's tree by anti-entropy, then forwards.
    const fprompt = Array.from({ length: 540 }, (_, i) => `fwd${i}`).join(" ");
    const forwarded = async (c: typeof cluster) => {
      const [ca, cb] = c.nodes as [(typeof c.nodes)[0], (typeof c.nodes)[0]];
      await fetch(`${cb.apiUrl}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model, prompt: fprompt, max_tokens: 1 }),
      });
      await new Promise((r) => setTimeout(r, 2000));
      return withCpu([ca.pid, cb.pid], () => measure(ca.apiUrl, model, "B", fprompt));
    };
    const fwdChannel = await forwarded(cluster);
    const fwdHttp = await forwarded(httpCluster);
    const rows = [
      ["engine direct", direct],
      ["node, served locally", local],
      ["forwarded, channel", fwdChannel],
      ["forwarded, HTTP/forward", fwdHttp],
    ] as const;
    console.log(`router overhead, ${N} sequential requests each (540-token prompt, 1 output token), ms`);
    console.log(
      `load average ${loadavg()
        .map((l) => l.toFixed(2))
        .join(" ")}`,
    );
    // cpu/req: CPU time of the serving processes (engine server; A; A + B) per request, load-insensitive.
    console.log("path                      p50     p99     mean    cpu/req");
    for (const [name, { lat: s, cpu }] of rows) {
      const mean = s.reduce((x, y) => x + y, 0) / s.length;
      console.log(
        `${name.padEnd(24)} ${q(s, 0.5).toFixed(3)}  ${q(s, 0.99).toFixed(3)}  ${mean.toFixed(3)}  ${cpu.toFixed(3)}`,
      );
    }
    const added = (label: string, s: number[], from: number[], nodes: number) =>
      console.log(
        `${label.padEnd(44)} p50 ${((q(s, 0.5) - q(from, 0.5)) / nodes).toFixed(3)}  p99 ${((q(s, 0.99) - q(from, 0.99)) / nodes).toFixed(3)}`,
      );
    console.log("added per node on the path (target: p50 <= 0.3, p99 <= 1):");
    added("  entry node serving (local − direct)", local.lat, direct.lat, 1);
    added("  forwarded, channel ((fwd − direct) / 2)", fwdChannel.lat, direct.lat, 2);
    added("  forwarded, HTTP ((fwd − direct) / 2)", fwdHttp.lat, direct.lat, 2);
    console.log("added by the peer hop alone (forwarded − local):");
    added("  channel", fwdChannel.lat, local.lat, 1);
    added("  HTTP request per forward", fwdHttp.lat, local.lat, 1);
  } finally {
    await Promise.all([cluster.stop(), httpCluster.stop()]);
    engineProc.kill("SIGTERM");
  }
}

await main();
