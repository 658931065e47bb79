/**
 * Router overhead: the same request sent (1) straight to an engine endpoint, (2) through a node that
 * serves it locally, (3) through a node that forwards it to the peer holding its prefix (mTLS peer
 * hop, no injected delay), over the forward channel and over an HTTP request per forward; beside them
 * (4) the bare wire: a WebSocket echo round trip between two processes, what any hop pays here before
 * a router does anything. Every process is separate; the engine is the simulated one at zero cost, so
 * the differences are the router's own cost. Run: npm run build && node dist/bench/router.js
 * (ROUTER_BENCH_CPU_LATENCY_US=0 in front: idle CPUs poll for the run, see CPU_LATENCY_US)
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Pool } from "undici";
import { WebSocket } from "ws";
import { DEFAULT_PROFILE, resolveProfile } from "../engines/sim/profiles.js";
import { SimEngine } from "../engines/sim/sim-engine.js";
import { answerRecord } from "../net/answer-wire.js";
import { initCa, issueNodeCert } from "../net/auth/ca.js";
import { opensslAvailable } from "../net/auth/openssl.js";
import { clientTlsOptions, loadTlsMaterial } from "../net/auth/tls.js";
import { encodeRecords } from "../net/channel-server.js";
import { encodeForwardFrame } from "../net/forward-frame.js";
import type { ForwardMsg, ReplyMsg } from "../net/transport-wire.js";
import { startCluster } from "../server/cluster/launcher.js";
import {
  type CpuLatencyHold,
  cpuLatencyInForceUs,
  holdCpuLatency,
} from "../server/runtime/cpu-latency-qos.js";
import { modelOf } from "./replay.js";

const N = Number(process.env.ROUTER_BENCH_N ?? 2000);
/**
 * Requests sent before measuring, per path: V8 keeps tiering a process's hot code up (TurboFan, on a
 * background thread that competes for the same cores) for the first few thousand requests, and a
 * daemon serves in the steady state after that (BENCHMARKS.md shows both).
 */
const WARMUP = Number(process.env.ROUTER_BENCH_WARMUP ?? 3000);
const RUNS = Number(process.env.ROUTER_BENCH_RUNS ?? 3);
/** Each path's N measured requests come in this many turns, interleaved with the other paths'. */
const BATCHES = 10;
/** Requests per path and turn: N rounded down to whole turns (the report says how many were measured). */
const PER_BATCH = Math.max(1, Math.floor(N / BATCHES));
/**
 * ROUTER_BENCH_CPU_LATENCY_US=0: hold Linux's PM QoS CPU latency limit for the whole run, for every
 * path alike (idle CPUs poll instead of halting; see src/server/runtime/cpu-latency-qos.ts). Unset: the
 * machine's own setting.
 */
const CPU_LATENCY_US = process.env.ROUTER_BENCH_CPU_LATENCY_US;
const prompt = Array.from({ length: 540 }, (_, i) => `tok${i}`).join(" ");

/**
 * One measured path: `send` makes one request and resolves with its latency (ms); `pids` are the
 * serving processes whose CPU time the path is charged with while its requests run.
 */
interface Path {
  pids: (number | undefined)[];
  send(): Promise<number>;
  close(): Promise<void>;
}

/** A path of sequential completions through `url`; fails if the wrong node serves. */
function httpPath(
  url: string,
  model: string,
  pids: (number | undefined)[],
  expectServedBy?: string,
  p = prompt,
): Path {
  const pool = new Pool(url, { connections: 1 });
  const body = JSON.stringify({ model, prompt: p, max_tokens: 1 });
  return {
    pids,
    async send() {
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
      return dt;
    },
    close: () => pool.close(),
  };
}

/**
 * Runs `paths` side by side: WARMUP requests on each, then N each in BATCHES rounds of N / BATCHES,
 * path after path — so a moment when the machine is slow (a neighbour, a helper thread) falls on every
 * path alike rather than on whichever ran then. Returns each path's sorted latencies and CPU per request.
 */
async function interleaved(paths: Path[]): Promise<{ lat: number[]; cpu: number }[]> {
  for (const path of paths) for (let i = 0; i < WARMUP; i++) await path.send();
  const out = paths.map(() => ({ lat: [] as number[], cpuMs: 0 }));
  for (let b = 0; b < BATCHES; b++) {
    for (const [i, path] of paths.entries()) {
      const before = path.pids.map(cpuMs);
      for (let k = 0; k < PER_BATCH; k++) (out[i] as { lat: number[] }).lat.push(await path.send());
      (out[i] as { cpuMs: number }).cpuMs += path.pids.reduce<number>(
        (sum, pid, j) => sum + cpuMs(pid) - (before[j] as number),
        0,
      );
    }
  }
  return out.map((o) => ({ lat: o.lat.sort((a, b) => a - b), cpu: o.cpuMs / o.lat.length }));
}

/** Starts a bench helper script (dist/bench/NAME.js) that prints its URL on its first line. */
async function spawnHelper(name: string, env: NodeJS.ProcessEnv = {}) {
  const proc = spawn(process.execPath, [fileURLToPath(new URL(`./${name}.js`, import.meta.url))], {
    stdio: ["ignore", "pipe", "inherit"],
    env: { ...process.env, ...env },
  });
  const url = await new Promise<string>((resolve) =>
    proc.stdout?.once("data", (d: Buffer) => resolve(d.toString().trim())),
  );
  return { proc, url };
}

/**
 * The channel frames of one forward of `text` to a sim peer and of its answer, encoded as the node
 * encodes them (tokens only: a sim engine needs no prompt text; the answer's chunk and final record
 * in one frame): what the wire baseline must carry to cost what a forward's hop costs.
 */
async function forwardFrames(text: string): Promise<{ out: Buffer; back: Buffer }> {
  // At zero modelled cost, as the measured nodes run (--sim-time-scale 0).
  const engine = new SimEngine({ profile: resolveProfile(DEFAULT_PROFILE), timeScale: 0 });
  // Request ids as the daemon makes them: node, epoch (wall-clock ms at start), sequence number.
  const reqId = `A-${Date.now()}-1`;
  const request = { id: reqId, tokens: await engine.tokenize(text), maxTokens: 1 };
  const forward: ForwardMsg = {
    type: "forward",
    reqId,
    attempt: 0,
    hops: 1,
    deadlineMs: 30_000,
    request,
  };
  const result = await engine.run(request);
  const answer: ReplyMsg = {
    type: "result",
    reqId,
    attempt: 0,
    result,
    timing: { servedBy: "B", queueMs: 0, prefillMs: result.prefillMs, decodeMs: result.decodeMs },
  };
  const back = encodeRecords([answerRecord.chunk(0, result.text), answerRecord.final(0, answer)]);
  return { out: encodeForwardFrame(0, forward, false), back };
}

/**
 * Round trips to the wire echo: a forward's frame out, its answer's size back (see forwardFrames),
 * with the channel's client settings (no compression, zero mask).
 */
async function wirePath(
  url: string,
  tls: Record<string, unknown> | undefined,
  pid: number | undefined,
  frame: Buffer,
): Promise<Path> {
  const ws = new WebSocket(url, {
    perMessageDeflate: false,
    generateMask: (m: Buffer) => void m.fill(0),
    ...(tls ?? {}),
  });
  await new Promise((resolve, reject) => {
    ws.once("open", resolve);
    ws.once("error", reject);
  });
  let answered: (() => void) | undefined;
  ws.on("message", () => answered?.());
  return {
    pids: [pid],
    async send() {
      const t0 = performance.now();
      await new Promise<void>((resolve) => {
        answered = resolve;
        ws.send(frame, { binary: true });
      });
      return performance.now() - t0;
    },
    async close() {
      ws.terminate();
    },
  };
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

const q = (s: number[], p: number) => s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)] as number;

/** What the run's CPU wake-up latency limit is, for the report's header. */
function cpuLatencyNote(held: CpuLatencyHold | undefined): string {
  if (held) return `held at ${held.requestedUs} µs by the bench (idle CPUs poll instead of halting)`;
  try {
    return `the machine's (${cpuLatencyInForceUs()} µs in force)`;
  } catch {
    return "the machine's";
  }
}

async function main() {
  let cpuLatency: CpuLatencyHold | undefined;
  try {
    cpuLatency = CPU_LATENCY_US === undefined ? undefined : holdCpuLatency(Number(CPU_LATENCY_US));
  } catch (err) {
    console.error(`ROUTER_BENCH_CPU_LATENCY_US: ${(err as Error).message}`);
    process.exit(2);
  }
  const { proc: engineProc, url: engineUrl } = await spawnHelper("engine-server");
  // The wire baseline speaks the nodes' security mode: mTLS with a cluster CA, or plain TCP (HMAC).
  const secret = process.env.ROUTER_BENCH_SECRET === "1" || !(await opensslAvailable());
  const certDir = mkdtempSync(join(tmpdir(), "pm-wire-"));
  if (!secret) {
    await initCa(certDir, { clusterId: "bench" });
    await Promise.all([issueNodeCert(certDir, "E"), issueNodeCert(certDir, "C")]);
  }
  const fprompt = Array.from({ length: 540 }, (_, i) => `fwd${i}`).join(" ");
  const frames = await forwardFrames(fprompt);
  const wire = await spawnHelper("wire-echo", {
    WIRE_REPLY_BYTES: String(frames.back.length),
    ...(secret ? {} : { WIRE_TLS_DIR: certDir }),
  });
  const wireTls = secret ? undefined : clientTlsOptions(await loadTlsMaterial(certDir, "C"), "E");
  // Two 2-node clusters, alike but for how forwards travel: one WebSocket channel per peer (the
  // default) vs one HTTP request per forward. One cluster at a time (no idle cluster's gossip in the
  // other's numbers); ROUTER_BENCH_RUNS rounds, every path once per round, medians reported.
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
    sharedSecret: secret,
  } as const;
  /** Forward path: B gets a prompt A has never seen, A learns B's tree by anti-entropy, then forwards. */
  const forwarded = async (c: Awaited<ReturnType<typeof startCluster>>, model: string): Promise<Path> => {
    const [ca, cb] = c.nodes as [(typeof c.nodes)[0], (typeof c.nodes)[0]];
    await fetch(`${cb.apiUrl}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model, prompt: fprompt, max_tokens: 1 }),
    });
    await new Promise((r) => setTimeout(r, 2000));
    return httpPath(ca.apiUrl, model, [ca.pid, cb.pid], "B", fprompt);
  };
  const names = [
    secret ? "wire: WebSocket echo" : "wire: TLS WebSocket echo",
    "engine direct",
    "node, served locally",
    "forwarded, channel",
    "engine direct (beside HTTP)",
    "forwarded, HTTP/forward",
  ] as const;
  type Stat = { p50: number; p99: number; mean: number; cpu: number };
  const runs: Stat[][] = [];
  const stat = ({ lat, cpu }: { lat: number[]; cpu: number }): Stat => ({
    p50: q(lat, 0.5),
    p99: q(lat, 0.99),
    mean: lat.reduce((x, y) => x + y, 0) / lat.length,
    cpu,
  });
  /** Measures `paths` interleaved, then closes them. */
  const measureAll = async (paths: Path[]) => {
    try {
      return (await interleaved(paths)).map(stat);
    } finally {
      await Promise.all(paths.map((p) => p.close()));
    }
  };
  try {
    for (let r = 0; r < RUNS; r++) {
      // The channel cluster: the wire, the bare engine, A serving, A forwarding to B, side by side.
      const cluster = await startCluster(base);
      let first: Stat[];
      try {
        const a = cluster.nodes[0] as (typeof cluster.nodes)[0];
        const model = await modelOf(a.apiUrl);
        first = await measureAll([
          await wirePath(wire.url, wireTls, wire.proc.pid, frames.out),
          httpPath(engineUrl, model, [engineProc.pid]),
          // Local path: A holds the prompt after its first run; routing keeps it at A (ties go to self).
          httpPath(a.apiUrl, model, [a.pid], "A"),
          await forwarded(cluster, model),
        ]);
      } finally {
        await cluster.stop();
      }
      // Then the HTTP-per-forward cluster (never both at once: no idle cluster's gossip in the figures).
      const httpCluster = await startCluster({ ...base, extraArgs: ["--forward-transport", "http"] });
      try {
        const model = await modelOf((httpCluster.nodes[0] as (typeof httpCluster.nodes)[0]).apiUrl);
        const second = await measureAll([
          httpPath(engineUrl, model, [engineProc.pid]),
          await forwarded(httpCluster, model),
        ]);
        runs.push([...first, ...second]);
      } finally {
        await httpCluster.stop();
      }
    }
  } finally {
    engineProc.kill("SIGTERM");
    wire.proc.kill("SIGTERM");
    rmSync(certDir, { recursive: true, force: true });
  }
  const latencyNote = cpuLatencyNote(cpuLatency);
  cpuLatency?.release();

  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)] as number;
  const med = names.map((_, i) => {
    const col = runs.map((run) => run[i] as Stat);
    return {
      p50: median(col.map((c) => c.p50)),
      p99: median(col.map((c) => c.p99)),
      mean: median(col.map((c) => c.mean)),
      cpu: median(col.map((c) => c.cpu)),
    };
  });
  const f = (x: number) => x.toFixed(3);
  console.log(
    `router overhead, ${PER_BATCH * BATCHES} sequential requests per path and round (540-token prompt, 1 output token), ${RUNS} rounds, ms`,
  );
  console.log(`wire frames: forward ${frames.out.length} B out, answer ${frames.back.length} B back`);
  console.log(`CPU latency limit: ${latencyNote}`);
  console.log(
    `load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(" ")}`,
  );
  // cpu/req: CPU time of the serving processes (echo; engine server; A; A + B) per request, load-insensitive.
  console.log(`path (median of ${RUNS})         p50     p99     mean    cpu/req   p50 per round`);
  names.forEach((name, i) => {
    const m = med[i] as Stat;
    const per = runs.map((run) => f((run[i] as Stat).p50)).join(" ");
    console.log(`${name.padEnd(28)} ${f(m.p50)}  ${f(m.p99)}  ${f(m.mean)}  ${f(m.cpu)}     ${per}`);
  });
  const [wireM, directM, localM, chanM, direct2M, httpM] = med as [Stat, Stat, Stat, Stat, Stat, Stat];
  const line = (label: string, p50: number, p99: number) =>
    console.log(`${label.padEnd(46)} p50 ${f(p50)}  p99 ${f(p99)}`);
  // Each forwarded path against the bare engine measured beside it (interleaved, same moments).
  const fwd = [
    ["channel", chanM, directM],
    ["HTTP", httpM, direct2M],
  ] as const;
  console.log("added per node on the path (target: p50 <= 0.3, p99 <= 1):");
  line("  entry node serving (local − direct)", localM.p50 - directM.p50, localM.p99 - directM.p99);
  for (const [label, m, d] of fwd) {
    line(`  forwarded, ${label} ((fwd − direct) / 2)`, (m.p50 - d.p50) / 2, (m.p99 - d.p99) / 2);
  }
  // The wire and the local path run beside the channel cluster only: the HTTP path (another cluster,
  // other moments) is not set against them.
  console.log("the same, net of the wire round trip ((fwd − direct − wire) / 2):");
  line(
    "  forwarded, channel",
    (chanM.p50 - directM.p50 - wireM.p50) / 2,
    (chanM.p99 - directM.p99 - wireM.p99) / 2,
  );
  console.log("added by the peer hop alone (forwarded − local):");
  line("  channel", chanM.p50 - localM.p50, chanM.p99 - localM.p99);
}

await main();
