/**
 * Slow loris against a node's API port: one client address (127.0.0.2, loopback too) opens many
 * connections and sends each request's headers a line at a time (or nothing at all), reopening every
 * connection the node closes, while another client (127.0.0.1) sends ordinary requests. Reported: how
 * many of that client's requests were answered and how fast, what the attacker's sockets met (429s,
 * 408s, idle closes), and the node process's memory and open file descriptors during the attack.
 * Run: npm run build && node dist/bench/slow-loris.js (SLOW_LORIS_SOCKETS, SLOW_LORIS_REQUESTS,
 * SLOW_LORIS_ARGS="--headers-timeout-ms 5000" to change the attack, the client or the node's settings;
 * SLOW_LORIS_CLI=path/to/main.js to attack another build, SLOW_LORIS_ADMITTED=n how many of the
 * attacker's connections that build admits).
 */
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { fileURLToPath } from "node:url";
import { Pool } from "undici";
import { freePort } from "../server/cluster/launcher.js";
import { modelOf } from "./replay.js";

export interface SlowLorisOptions {
  host: string;
  port: number;
  /** The attacker's own address (a loopback one other than the victim client's). */
  from: string;
  sockets: number;
  /** One header line per socket every this many ms (a socket's first line right at connect). */
  dripMs: number;
  /** Of the sockets, this share sends nothing at all. */
  silentShare: number;
  /** Reopens, in all, of connections the server closed (bounds the attack's own work). */
  maxReopens: number;
  /** A closed connection is reopened after this many ms (default: `dripMs`). */
  reopenMs?: number;
}

export interface SlowLorisStats {
  opened: number;
  /** Connections the server closed (any way). */
  closed: number;
  /** Status lines the server answered with, by status (429: over the share; 408: too slow). */
  statuses: Record<string, number>;
  /** The attacker's sockets connected right now. */
  open: number;
  /** Most of them connected at once. */
  peakOpen: number;
  connectErrors: number;
}

export interface SlowLoris {
  stats(): SlowLorisStats;
  /** Destroys every socket; resolves once all are closed. */
  stop(): Promise<void>;
}

export function startSlowLoris(o: SlowLorisOptions): SlowLoris {
  /** `dripping`: its request line is out (a line sent before it would make a bad request, not a slow one). */
  const live = new Set<Socket & { dripping?: boolean }>();
  const stats: SlowLorisStats = {
    opened: 0,
    closed: 0,
    statuses: {},
    open: 0,
    peakOpen: 0,
    connectErrors: 0,
  };
  let reopens = 0;
  let stopped = false;
  const drip = setInterval(() => {
    for (const s of live) if (s.dripping && s.writable) s.write("X-a: b\r\n");
  }, o.dripMs);
  drip.unref();

  const open = (i: number) => {
    const s = connect({ host: o.host, port: o.port, localAddress: o.from }) as Socket & {
      dripping?: boolean;
    };
    const silent = i < o.sockets * o.silentShare;
    stats.opened++;
    live.add(s);
    let connected = false;
    let got = "";
    s.on("connect", () => {
      connected = true;
      stats.open++;
      stats.peakOpen = Math.max(stats.peakOpen, stats.open);
      if (silent) return;
      s.write("GET /health HTTP/1.1\r\nHost: x\r\n");
      s.dripping = true;
    });
    s.on("data", (d: Buffer) => {
      if (got.length < 16) got += d.toString("latin1", 0, 16);
    });
    s.on("error", () => {
      if (!connected) stats.connectErrors++;
    });
    s.on("close", () => {
      live.delete(s);
      if (connected) stats.open--;
      stats.closed++;
      const status = /^HTTP\/1\.1 (\d{3})/.exec(got)?.[1] ?? "none";
      stats.statuses[status] = (stats.statuses[status] ?? 0) + 1;
      if (!stopped && reopens < o.maxReopens) {
        reopens++;
        // A moment later, not at once: a refused socket reopened in the same tick is a busy loop.
        setTimeout(() => !stopped && open(i), o.reopenMs ?? o.dripMs).unref();
      }
    });
  };
  for (let i = 0; i < o.sockets; i++) open(i);

  return {
    stats: () => ({ ...stats, statuses: { ...stats.statuses } }),
    async stop() {
      stopped = true;
      clearInterval(drip);
      const closing = [...live].map((s) => new Promise<void>((r) => s.once("close", () => r())));
      for (const s of live) s.destroy();
      await Promise.all(closing);
    },
  };
}

export interface ClientRun {
  sent: number;
  answered: number;
  /** Statuses other than 200, by status (or the error's name). */
  failures: Record<string, number>;
  /** Sorted latencies of the answered requests, ms. */
  latencies: number[];
}

/** `n` completions one after another from `from`, each given `timeoutMs`. */
export async function runClient(
  apiUrl: string,
  n: number,
  opts: { from?: string; timeoutMs?: number } = {},
): Promise<ClientRun> {
  const model = await modelOf(apiUrl);
  const pool = new Pool(apiUrl, {
    connections: 1,
    ...(opts.from ? { connect: { localAddress: opts.from } } : {}),
  });
  const out: ClientRun = { sent: 0, answered: 0, failures: {}, latencies: [] };
  try {
    for (let i = 0; i < n; i++) {
      out.sent++;
      const t0 = performance.now();
      try {
        const res = await pool.request({
          method: "POST",
          path: "/v1/completions",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model, prompt: `question ${i} about the loris`, max_tokens: 4 }),
          signal: AbortSignal.timeout(opts.timeoutMs ?? 30_000),
        });
        await res.body.text();
        if (res.statusCode === 200) {
          out.answered++;
          out.latencies.push(performance.now() - t0);
        } else out.failures[res.statusCode] = (out.failures[res.statusCode] ?? 0) + 1;
      } catch (err) {
        const name = (err as Error).name;
        out.failures[name] = (out.failures[name] ?? 0) + 1;
      }
    }
  } finally {
    await pool.close();
  }
  out.latencies.sort((a, b) => a - b);
  return out;
}

/** Resident memory (MiB) and open file descriptors of process `pid` (Linux /proc), or undefined. */
export function processUse(pid: number): { rssMiB: number; fds: number } | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const rssKiB = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1]);
    return { rssMiB: rssKiB / 1024, fds: readdirSync(`/proc/${pid}/fd`).length };
  } catch {
    return undefined;
  }
}

/** `prefixmesh_connections_refused_total{port="api",reason}` as the node reports it. */
export async function refusedCount(apiUrl: string, reason: string): Promise<number> {
  const text = await (await fetch(`${apiUrl}/metrics`)).text();
  const re = new RegExp(
    `^prefixmesh_connections_refused_total\\{[^}]*port="api",reason="${reason}"[^}]*\\} (\\d+)`,
    "m",
  );
  return Number(re.exec(text)?.[1] ?? 0);
}

export const quantile = (sorted: number[], q: number): number =>
  sorted.length === 0
    ? Number.NaN
    : (sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0);

async function main(): Promise<void> {
  const sockets = Number(process.env.SLOW_LORIS_SOCKETS ?? 1100);
  const requests = Number(process.env.SLOW_LORIS_REQUESTS ?? 2000);
  const extra = (process.env.SLOW_LORIS_ARGS ?? "").split(/\s+/).filter(Boolean);
  const [api, peer] = [await freePort("127.0.0.1"), await freePort("127.0.0.1")];
  const cli = process.env.SLOW_LORIS_CLI ?? fileURLToPath(new URL("../cli/main.js", import.meta.url));
  const args = ["node", "--id", "A", "--listen", `127.0.0.1:${api}`, "--peer-listen", `127.0.0.1:${peer}`];
  const node = spawn(
    process.execPath,
    [cli, ...args, "--engine", "sim", "--sim-time-scale", "0.02", "--log-level", "warn", ...extra],
    { stdio: ["ignore", "inherit", "inherit"] },
  );
  const url = `http://127.0.0.1:${api}`;
  try {
    for (let i = 0; ; i++) {
      if (
        await fetch(`${url}/ready`).then(
          (r) => r.ok,
          () => false,
        )
      )
        break;
      if (i > 600) throw new Error("the node did not become ready");
      await new Promise((r) => setTimeout(r, 100));
    }
    const pid = node.pid as number;
    const baseline = await runClient(url, requests);
    const before = processUse(pid);
    const attack = startSlowLoris({
      host: "127.0.0.1",
      port: api,
      from: "127.0.0.2",
      sockets,
      dripMs: 1000,
      silentShare: 0.5,
      maxReopens: 100_000,
    });
    let peak = before;
    const sampler = setInterval(() => {
      const u = processUse(pid);
      if (u && peak) peak = { rssMiB: Math.max(peak.rssMiB, u.rssMiB), fds: Math.max(peak.fds, u.fds) };
    }, 200);
    // The attack is on once the node has refused (429, or 503 over its total) every connection
    // beyond what it admits of them: by default an eighth of --max-connections.
    const flag = (name: string) => {
      const i = extra.indexOf(name);
      return i >= 0 ? Number(extra[i + 1]) : undefined;
    };
    const admitted = Number(
      process.env.SLOW_LORIS_ADMITTED ??
        flag("--max-connections-per-address") ??
        Math.max(1, Math.floor((flag("--max-connections") ?? 1024) / 8)),
    );
    const refusals = () => (attack.stats().statuses["429"] ?? 0) + (attack.stats().statuses["503"] ?? 0);
    for (let i = 0; refusals() < sockets - admitted; i++) {
      if (i > 600) throw new Error("the node never refused the attacker's connections");
      await new Promise((r) => setTimeout(r, 100));
    }
    const t0 = performance.now();
    const during = await runClient(url, requests);
    const seconds = (performance.now() - t0) / 1000;
    clearInterval(sampler);
    const a = attack.stats();
    await attack.stop();
    const metrics = await (await fetch(`${url}/metrics`)).text();
    const refused = metrics
      .split("\n")
      .filter((l) => l.startsWith("prefixmesh_connections_refused_total{"))
      .join("\n");
    const summary = (r: ClientRun) =>
      `${r.answered}/${r.sent} answered, p50 ${quantile(r.latencies, 0.5).toFixed(1)} ms, p99 ${quantile(r.latencies, 0.99).toFixed(1)} ms, max ${(r.latencies.at(-1) ?? Number.NaN).toFixed(1)} ms`;
    console.log(`node settings: defaults ${extra.join(" ")}`);
    console.log(`client alone:         ${summary(baseline)}`);
    console.log(`client under attack:  ${summary(during)} (${seconds.toFixed(1)} s)`);
    if (Object.keys(during.failures).length) console.log(`  failures: ${JSON.stringify(during.failures)}`);
    console.log(
      `attacker (127.0.0.2): ${sockets} sockets, ${a.opened} opened in all, peak ${a.peakOpen} connected, answers ${JSON.stringify(a.statuses)}`,
    );
    console.log(
      `node process: RSS ${before?.rssMiB.toFixed(0)} → peak ${peak?.rssMiB.toFixed(0)} MiB, fds ${before?.fds} → peak ${peak?.fds}`,
    );
    console.log(refused);
  } finally {
    node.kill("SIGTERM");
    await new Promise((r) => node.once("exit", r));
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
