/**
 * A member that floods a node with full snapshots at the key cap (2^21 keys, 12.6 MB each), and what
 * that does to the node's event loop, measured as `/health` latency from another process's view.
 * The flooding member is `SnapshotFloodPeerDouble`: a test double, not a node — it only speaks the
 * insecure peer protocol's snapshot endpoint under a member's id (the node is started with that id as
 * a static peer whose own port is closed, so the node's sends to it fail and nothing else happens),
 * so the node runs the full mesh (`--gossip full`), whose wire that endpoint is.
 * Run: npm run build && node dist/bench/snapshot-stall.js
 * (SNAPSHOT_STALL_FRAMES=n full snapshots, default 4; SNAPSHOT_STALL_ARGS="--…" extra node flags,
 * e.g. a `--snapshot-step-keys 0` build comparison is not a flag: see BENCHMARKS.md;
 * SNAPSHOT_STALL_NODE_ARGS="--…" flags for the node's V8/Node runtime, e.g. `--single-threaded-gc`;
 * with them the node's stdout is shown, so `--trace-gc` prints the node's collections: run under
 * `stdbuf -oL` when the output goes to a file or pipe, or V8's buffered lines are lost when it stops).
 */

import { fork, spawn } from "node:child_process";
import { rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { BLOCK_SIZE } from "../core/block-hash.js";
import type { Snapshot } from "../core/snapshot.js";
import { encodeSnapshot } from "../core/snapshot-codec.js";
import { freePort } from "../server/cluster/launcher.js";
import { parseMetrics } from "../server/dashboard/series.js";
import { type LoopTurns, readLoopTurns } from "./loop-turns.js";
import { pollLoop } from "./poll-loop.js";

/** The most keys a snapshot may carry (the codec's and the index's cap). */
export const CAP_KEYS = 1 << 21;

/** Test double of a member: sends full snapshots of a made-up cache under the id `sender`. */
export class SnapshotFloodPeerDouble {
  constructor(
    private readonly peerUrl: string,
    private readonly sender: string,
    private readonly epoch = 1,
    /** The version the node holds already: frames go on from the next one. */
    private version = 0,
  ) {}

  /** A full snapshot frame of `keys` distinct random 48-bit keys at the next version. */
  frame(keys = CAP_KEYS, capacityTokens = keys * BLOCK_SIZE): { bytes: Uint8Array; version: number } {
    const body = new Float64Array(keys);
    let x = (this.version + 1) * 0x9e3779b1;
    for (let i = 0; i < keys; i++) {
      x = (Math.imul(x ^ (x >>> 15), 0x2c1b3c6d) + i) | 0;
      body[i] = (x >>> 0) + (i % 65536) * 4294967296;
    }
    this.version++;
    const s: Snapshot = {
      kind: "full",
      header: {
        sender: this.sender,
        epoch: this.epoch,
        version: this.version,
        tokenCount: keys * BLOCK_SIZE,
        capacity: capacityTokens,
        queueDepth: 0,
        pushBackMs: 0,
      },
      body: { blockSize: BLOCK_SIZE, keys: body },
    };
    return { bytes: encodeSnapshot(s), version: this.version };
  }

  /** POSTs one frame; resolves with the HTTP status. */
  async send(bytes: Uint8Array): Promise<number> {
    const r = await fetch(`${this.peerUrl}/peer/snapshot`, {
      method: "POST",
      headers: { "content-type": "application/octet-stream", "x-prefixmesh-sender": this.sender },
      body: new Blob([bytes as Uint8Array<ArrayBuffer>]),
    });
    await r.arrayBuffer();
    return r.status;
  }
}

/** The compiled `/health` poller beside the CLI `cli` (dist/cli/main.js → dist/bench/health-poller.js). */
export function pollerBeside(cli: string): string {
  return besideCli(cli, "health-poller.js");
}

/**
 * Polls `url` one request at a time (5 ms apart) until `stop()`, or until it has `count` round trips
 * (`stop()` then waits for them); returns each round trip in ms. With `script` (health-poller.js) the
 * polling runs in a process of its own, else in this one.
 */
export async function pollLatency(
  url: string,
  script?: string,
  count?: number,
): Promise<{ stop: () => Promise<number[]> }> {
  if (script === undefined) return pollHere(url, count);
  const args = count === undefined ? [url] : [url, String(count)];
  const child = fork(script, args, { stdio: ["ignore", "ignore", "inherit", "ipc"] });
  const samples = new Promise<number[]>((resolve, reject) => {
    child.on("message", (m: unknown) => {
      if (typeof m === "object" && m !== null && "samples" in m)
        resolve((m as { samples: number[] }).samples);
    });
    child.once("exit", (code) => reject(new Error(`the /health poller exited (${code}) before reporting`)));
  });
  await new Promise<void>((resolve, reject) => {
    child.once("message", () => resolve());
    child.once("error", reject);
    child.once("exit", (code) => reject(new Error(`the /health poller exited (${code}) at start`)));
  });
  return {
    stop: async () => {
      if (count === undefined) child.send("stop");
      return samples;
    },
  };
}

function pollHere(url: string, count = Number.POSITIVE_INFINITY): { stop: () => Promise<number[]> } {
  const samples: number[] = [];
  let running = true;
  const loop = pollLoop(url, samples, () => running && samples.length < count);
  return {
    stop: async () => {
      if (count === Number.POSITIVE_INFINITY) running = false;
      await loop;
      return samples;
    },
  };
}

export function percentile(xs: number[], p: number): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
}

/** The compiled bench file `name` beside the CLI `cli` (dist/cli/main.js → dist/bench/NAME). */
function besideCli(cli: string, name: string): string {
  return join(dirname(cli), "..", "bench", name);
}

export interface Victim {
  apiUrl: string;
  peerUrl: string;
  pid: number;
  /** Where loop-turn-probe.js writes the node's long turns, when started with the probe. */
  turnsFile?: string;
  stop: () => Promise<void>;
}

/**
 * A node (the built CLI) with a static peer "B" whose port is closed; its API and peer URLs. With
 * `probe`, the node runs loop-turn-probe.js (beside the CLI), writing its long turns to a temp file;
 * with `showStdout`, the node's stdout is ours (where V8's `--trace-gc` prints).
 */
export async function startVictim(
  cli: string,
  extra: string[] = [],
  nodeArgs: string[] = [],
  probe = false,
  showStdout = false,
): Promise<Victim> {
  const turnsFile = probe ? join(tmpdir(), `loop-turns-${process.pid}-${Date.now()}.txt`) : undefined;
  if (turnsFile !== undefined) {
    writeFileSync(turnsFile, "");
    nodeArgs = ["--import", pathToFileURL(besideCli(cli, "loop-turn-probe.js")).href, ...nodeArgs];
  }
  const [api, peer, dead] = [
    await freePort("127.0.0.1"),
    await freePort("127.0.0.1"),
    await freePort("127.0.0.1"),
  ];
  const child = spawn(
    process.execPath,
    [
      ...nodeArgs,
      cli,
      "node",
      ...["--id", "A", "--listen", `127.0.0.1:${api}`, "--peer-listen", `127.0.0.1:${peer}`],
      ...["--peers", `B=http://127.0.0.1:${dead}`, "--insecure"],
      // The full snapshot frame at the key cap is the full mesh's wire (`/peer/snapshot`, which the
      // double speaks); the scuttlebutt mode carries estimates in mesh messages (`/peer/mesh`).
      ...["--gossip", "full"],
      ...["--engine", "sim", "--sim-time-scale", "0.02", "--log-level", "error", ...extra],
    ],
    {
      stdio: ["ignore", showStdout ? "inherit" : "ignore", "inherit"],
      env: turnsFile === undefined ? process.env : { ...process.env, LOOP_TURN_PROBE_OUT: turnsFile },
    },
  );
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  const apiUrl = `http://127.0.0.1:${api}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    const ok = await fetch(`${apiUrl}/ready`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (Date.now() > deadline || child.exitCode !== null) throw new Error("the node did not become ready");
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    apiUrl,
    peerUrl: `http://127.0.0.1:${peer}`,
    pid: child.pid as number,
    ...(turnsFile === undefined ? {} : { turnsFile }),
    stop: async () => {
      child.kill("SIGTERM");
      await exited;
      if (turnsFile !== undefined) rmSync(turnsFile, { force: true });
    },
  };
}

/** Our estimate of `peer` at `apiUrl`: the version held and its size in tokens. */
export async function estimateOf(
  apiUrl: string,
  peer: string,
): Promise<{ version: number | undefined; tokens: number }> {
  const v = (await (await fetch(`${apiUrl}/cluster`)).json()) as {
    peers: { id: string; held?: { version: number } | null; estimateTokens: number }[];
  };
  const p = v.peers.find((x) => x.id === peer);
  return { version: p?.held?.version ?? undefined, tokens: p?.estimateTokens ?? 0 };
}

export interface Latencies {
  n: number;
  p50: number;
  p99: number;
  max: number;
}

export function summarize(xs: number[]): Latencies {
  return { n: xs.length, p50: percentile(xs, 50), p99: percentile(xs, 99), max: Math.max(...xs) };
}

/**
 * The node's own longest event-loop delay (ms) since the previous call: prom-client's
 * `nodejs_eventloop_lag_max_seconds` (a `monitorEventLoopDelay` histogram at 10 ms resolution, reset
 * at every scrape).
 */
export async function eventLoopDelayMax(apiUrl: string): Promise<number> {
  const text = await (await fetch(`${apiUrl}/metrics`)).text();
  const sample = parseMetrics(text).find((m) => m.name === "nodejs_eventloop_lag_max_seconds");
  return sample === undefined ? Number.NaN : sample.value * 1000;
}

/** How long an idle measurement polls: for `ms`, or until it has `count` round trips. */
export type IdleBound = { ms: number } | { count: number };

/**
 * `/health` round trips with nothing else going on, polled as `measureStall` polls (for a time, or as
 * many as a measurement beside it took): what the machine's load alone does to the node's latency.
 */
export async function idleLatency(
  apiUrl: string,
  bound: IdleBound,
  poller?: string,
): Promise<Latencies & { loopDelayMax: number }> {
  await eventLoopDelayMax(apiUrl);
  const poll = await pollLatency(`${apiUrl}/health`, poller, "count" in bound ? bound.count : undefined);
  if ("ms" in bound) await new Promise((r) => setTimeout(r, bound.ms));
  const xs = await poll.stop();
  return { ...summarize(xs), loopDelayMax: await eventLoopDelayMax(apiUrl) };
}

export interface StallResult {
  frames: number;
  frameBytes: number;
  /** /health round trips while the frames were sent and applied. */
  health: Latencies;
  /** The node's longest event-loop delay over the same time (ms). */
  loopDelayMax: number;
  /**
   * The node's long loop turns and GC pauses meanwhile (loop-turn-probe.ts; undefined without the
   * probe): main-thread CPU per turn, its own work apart from the time a busy machine kept it off a CPU.
   */
  turns?: LoopTurns;
  /** From the first frame sent to the last one's version held. */
  applyMs: number;
}

/**
 * Sends `frames` full snapshots at the cap as member B and measures `/health` until the last is held
 * (from a process of its own when `poller`, health-poller.js, is given).
 */
export async function measureStall(
  node: { apiUrl: string; peerUrl: string; turnsFile?: string },
  frames: number,
  poller?: string,
): Promise<StallResult> {
  // Versions go on from what the node holds: a frame it holds already would not be applied again.
  const held = (await estimateOf(node.apiUrl, "B")).version ?? 0;
  const peer = new SnapshotFloodPeerDouble(node.peerUrl, "B", 1, held);
  const built = Array.from({ length: frames }, () => peer.frame());
  await eventLoopDelayMax(node.apiUrl);
  const turnsFrom = node.turnsFile === undefined ? 0 : statSync(node.turnsFile).size;
  const poll = await pollLatency(`${node.apiUrl}/health`, poller);
  const t0 = performance.now();
  for (const f of built) {
    const status = await peer.send(f.bytes);
    if (status !== 204) throw new Error(`snapshot refused: ${status}`);
  }
  const last = built[built.length - 1]!.version;
  const deadline = Date.now() + 120_000;
  while ((await estimateOf(node.apiUrl, "B")).version !== last) {
    if (Date.now() > deadline) throw new Error("the last snapshot was never applied");
    await new Promise((r) => setTimeout(r, 20));
  }
  const applyMs = performance.now() - t0;
  const xs = await poll.stop();
  return {
    frames,
    frameBytes: built[0]!.bytes.byteLength,
    health: summarize(xs),
    loopDelayMax: await eventLoopDelayMax(node.apiUrl),
    ...(node.turnsFile === undefined ? {} : { turns: readLoopTurns(node.turnsFile, turnsFrom) }),
    applyMs,
  };
}

/** The probe's figures in a line (the turns' main-thread CPU, with and without the GC pauses in them). */
export function turnsText(t: LoopTurns | undefined): string {
  if (t === undefined) return "no loop-turn probe";
  return (
    `longest turn ${t.cpuMax.toFixed(1)} ms of main-thread CPU, ${t.cpuMaxWithoutGc.toFixed(1)} ms less its GC ` +
    `pauses (longest pause ${t.gcPauseMax.toFixed(1)} ms)`
  );
}

async function main(): Promise<void> {
  const ownCli = fileURLToPath(new URL("../cli/main.js", import.meta.url));
  // The node may be another build (SNAPSHOT_STALL_CLI, a before/after comparison); the poller is ours.
  const cli = process.env.SNAPSHOT_STALL_CLI ?? ownCli;
  const frames = Number(process.env.SNAPSHOT_STALL_FRAMES ?? 4);
  const extra = (process.env.SNAPSHOT_STALL_ARGS ?? "").split(" ").filter((s) => s.length > 0);
  const nodeArgs = (process.env.SNAPSHOT_STALL_NODE_ARGS ?? "").split(" ").filter((s) => s.length > 0);
  const node = await startVictim(cli, extra, nodeArgs, true, nodeArgs.length > 0);
  const poller = pollerBeside(ownCli);
  try {
    const f = (x: number) => x.toFixed(1);
    const idle = await idleLatency(node.apiUrl, { ms: 5000 }, poller);
    console.log(
      `no snapshots, 5 s: /health n=${idle.n} p50 ${f(idle.p50)} ms, p99 ${f(idle.p99)} ms, max ${f(idle.max)} ms; ` +
        `node event-loop delay max ${f(idle.loopDelayMax)} ms`,
    );
    const r = await measureStall(node, frames, poller);
    console.log(
      `${r.frames} full snapshots of ${CAP_KEYS} keys (${(r.frameBytes / 1e6).toFixed(1)} MB each): ` +
        `/health n=${r.health.n} p50 ${f(r.health.p50)} ms, p99 ${f(r.health.p99)} ms, max ${f(r.health.max)} ms; ` +
        `node event-loop delay max ${f(r.loopDelayMax)} ms; ${turnsText(r.turns)}; ` +
        `all applied in ${f(r.applyMs)} ms`,
    );
  } finally {
    await node.stop();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
