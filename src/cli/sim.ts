/**
 * `prefixmesh sim`: runs the discrete-event simulator (src/sim) on a workload and prints the paper's
 * measurements (latency, expected vs actual hit, hotspot share, gossip cost).
 */
import { writeFile } from "node:fs/promises";
import { SingleBar } from "cli-progress";
import type { Command } from "commander";
import * as hdr from "hdr-histogram-js";
import { z } from "zod";
import { DAEMON_NODE_DEFAULTS, nodeConfigSchema } from "../core/node/config.js";
import { ALL_POLICY_NAMES } from "../core/node/policies/index.js";
import { DEFAULT_PROFILE, isProfileName, PROFILE_NAMES } from "../engines/sim/profiles.js";
import { DEFAULT_POLICY } from "../server/default-policy.js";
import { type NodeConfigNumberKey, nodeConfigNumber } from "../server/settings/index.js";
import { faultFlags, faultScheduleFor } from "../sim/fault-schedule.js";
import { type ClientFaults, MAX_UNBOUNDED_TOKENS } from "../sim/faults/client.js";
import { runSimulation, simGossip } from "../sim/run.js";
import type {
  EngineFaults,
  NetworkFaults,
  NodeFaults,
  SimConfig,
  SimFaults,
  SimResult,
} from "../sim/types.js";
import { historyHits, hitRate, idealHits } from "../workload/ideal-hit.js";
import type { Workload } from "../workload/types.js";
import { CliError, parseNumber } from "./errors.js";
import { parseFlag } from "./flags.js";
import { defaultNote } from "./help.js";
import {
  addWorkloadOptions,
  DEFAULT_MMLU_DIR,
  loadWorkload,
  parseWorkloadChoice,
  WORKLOADS,
  type WorkloadChoice,
  type WorkloadFlagValues,
} from "./workload-flags.js";

/** The simulated nodes' settings, whose defaults the help states. */
const N = nodeConfigSchema.shape;

export interface SimOptions extends WorkloadFlagValues {
  nodes: string;
  policy: string;
  commMs: string;
  jitterMs: string;
  pollMs: string;
  workload: string;
  mmluDir?: string;
  requests?: string;
  seed: string;
  json?: string;
  profile: string;
  capacityTokens?: string;
  concurrency?: string;
  loss?: string;
  dup?: string;
  crash?: string[];
  reorder?: string;
  reorderMaxMs?: string;
  partition?: string[];
  faultsUntilMs?: string;
  engineFail?: string;
  slowEngine?: string[];
  slowNode?: string[];
  stall?: string[];
  refuse?: string[];
  lie?: string[];
  unbounded?: string[];
  abandon?: string[];
  pause?: string[];
  randomFaults?: string;
  daemonConfig?: boolean;
  nodeConfig?: string;
  deadlineMs?: string;
  forwardTimeoutMs?: string;
  forwardAckTimeoutMs?: string;
  forwardResends?: string;
  oracle?: boolean;
  rate?: string;
  gossip?: string;
  maxEstimates?: string;
}

/** `--crash 1@60000:90000` = node 1 crashes at 60 s of virtual time and restarts at 90 s. */
export function parseCrash(
  spec: string,
  nodes: number,
): { node: number; atMs: number; restartAtMs?: number } {
  const m = /^n?(\d+)@(\d+(?:\.\d+)?)(?::(\d+(?:\.\d+)?))?$/.exec(spec.trim());
  if (!m)
    throw new CliError(
      `--crash must look like NODE@MS or NODE@MS:RESTART_MS (e.g. 1@60000:90000), got '${spec}'`,
    );
  const node = Number(m[1]);
  const atMs = Number(m[2]);
  if (node >= nodes) throw new CliError(`--crash node ${node} does not exist (nodes are 0-${nodes - 1})`);
  if (m[3] === undefined) return { node, atMs };
  const restartAtMs = Number(m[3]);
  if (!(restartAtMs > atMs))
    throw new CliError(`--crash restart time must be after the crash, got '${spec}'`);
  return { node, atMs, restartAtMs };
}

/**
 * `--partition 0,1/2,3@60000:120000` = from 60 s to 120 s of virtual time, nodes {0,1} and {2,3} cannot
 * reach each other; the partition heals at 120 s. Nodes not named form their own singleton groups.
 */
export function parsePartition(
  spec: string,
  nodes: number,
): { startMs: number; endMs: number; groups: number[][] } {
  const m = /^([\d,/]+)@(\d+(?:\.\d+)?):(\d+(?:\.\d+)?)$/.exec(spec.trim());
  if (!m)
    throw new CliError(
      `--partition must look like GROUP/GROUP@START_MS:END_MS (e.g. 0,1/2,3@60000:120000), got '${spec}'`,
    );
  const groups = (m[1] as string).split("/").map((g) =>
    g
      .split(",")
      .filter((x) => x !== "")
      .map(Number),
  );
  const seen = new Set<number>();
  for (const g of groups) {
    if (g.length === 0) throw new CliError(`--partition has an empty group: '${spec}'`);
    for (const n of g) {
      if (n >= nodes) throw new CliError(`--partition node ${n} does not exist (nodes are 0-${nodes - 1})`);
      if (seen.has(n)) throw new CliError(`--partition names node ${n} twice: '${spec}'`);
      seen.add(n);
    }
  }
  if (groups.length < 2) throw new CliError(`--partition needs at least two groups: '${spec}'`);
  const startMs = Number(m[2]);
  const endMs = Number(m[3]);
  if (!(endMs > startMs)) throw new CliError(`--partition must heal after it starts, got '${spec}'`);
  return { startMs, endMs, groups };
}

/** `--pause 2@30000:32000` = node 2 freezes from 30 s to 32 s of virtual time, then resumes. */
export function parsePause(spec: string, nodes: number): { node: number; atMs: number; untilMs: number } {
  const m = /^n?(\d+)@(\d+(?:\.\d+)?):(\d+(?:\.\d+)?)$/.exec(spec.trim());
  if (!m) throw new CliError(`--pause must look like NODE@MS:UNTIL_MS (e.g. 2@30000:32000), got '${spec}'`);
  const node = Number(m[1]);
  if (node >= nodes) throw new CliError(`--pause node ${node} does not exist (nodes are 0-${nodes - 1})`);
  const atMs = Number(m[2]);
  const untilMs = Number(m[3]);
  if (!(untilMs > atMs)) throw new CliError(`--pause must end after it starts, got '${spec}'`);
  return { node, atMs, untilMs };
}

/**
 * `--slow-engine 1x3` = node 1's engine runs take 3 × the modelled time; `1x3@10000:20000` only for runs
 * started in [10 s, 20 s) (`@10000:` from 10 s on).
 */
export function parseSlowEngine(
  spec: string,
  nodes: number,
): { node: number; factor: number; atMs?: number; untilMs?: number } {
  const m = /^n?(\d+)x(\d+(?:\.\d+)?)(?:@(\d+(?:\.\d+)?):(\d+(?:\.\d+)?)?)?$/.exec(spec.trim());
  if (!m)
    throw new CliError(
      `--slow-engine must look like NODExFACTOR or NODExFACTOR@START_MS:END_MS (e.g. 1x3@10000:20000), got '${spec}'`,
    );
  const node = Number(m[1]);
  if (node >= nodes)
    throw new CliError(`--slow-engine node ${node} does not exist (nodes are 0-${nodes - 1})`);
  const factor = Number(m[2]);
  if (!(factor > 0 && factor <= 1000))
    throw new CliError(`--slow-engine factor must be in (0, 1000], got '${spec}'`);
  if (m[3] === undefined) return { node, factor };
  const atMs = Number(m[3]);
  if (m[4] === undefined) return { node, factor, atMs };
  const untilMs = Number(m[4]);
  if (!(untilMs > atMs)) throw new CliError(`--slow-engine must end after it starts, got '${spec}'`);
  return { node, factor, atMs, untilMs };
}

/** `--slow-node 1:10` = node 1 is 10 × slower for the whole run (its engine; `--slow-engine 1x10`). */
export function parseSlowNode(spec: string, nodes: number): { node: number; factor: number } {
  const m = /^n?(\d+):(\d+(?:\.\d+)?)$/.exec(spec.trim());
  if (!m) throw new CliError(`--slow-node must look like NODE:FACTOR (e.g. 1:10), got '${spec}'`);
  const node = Number(m[1]);
  if (node >= nodes) throw new CliError(`--slow-node node ${node} does not exist (nodes are 0-${nodes - 1})`);
  const factor = Number(m[2]);
  if (!(factor > 0 && factor <= 1000))
    throw new CliError(`--slow-node factor must be in (0, 1000], got '${spec}'`);
  return { node, factor };
}

/**
 * `--stall 3` / `--refuse 3@10000:20000` = node 3 misbehaves as a peer (acks forwards and never
 * answers; refuses every forward with a 503) for the whole run or in [START_MS, END_MS).
 */
export function parseMisbehaviour(
  flag: "--stall" | "--refuse" | "--lie",
  spec: string,
  nodes: number,
): { node: number; atMs?: number; untilMs?: number } {
  const m = /^n?(\d+)(?:@(\d+(?:\.\d+)?):(\d+(?:\.\d+)?))?$/.exec(spec.trim());
  if (!m)
    throw new CliError(
      `${flag} must look like NODE or NODE@START_MS:END_MS (e.g. 3@10000:20000), got '${spec}'`,
    );
  const node = Number(m[1]);
  if (node >= nodes) throw new CliError(`${flag} node ${node} does not exist (nodes are 0-${nodes - 1})`);
  if (m[2] === undefined) return { node };
  const atMs = Number(m[2]);
  const untilMs = Number(m[3]);
  if (!(untilMs > atMs)) throw new CliError(`${flag} must end after it starts, got '${spec}'`);
  return { node, atMs, untilMs };
}

/** `--unbounded 120:32000` = workload request 120 asks for 32,000 output tokens (no max_tokens). */
export function parseUnbounded(spec: string): { request: number; maxTokens: number } {
  const m = /^(\d+):(\d+)$/.exec(spec.trim());
  if (!m) throw new CliError(`--unbounded must look like REQUEST:TOKENS (e.g. 120:32000), got '${spec}'`);
  const maxTokens = Number(m[2]);
  if (!(maxTokens >= 1 && maxTokens <= MAX_UNBOUNDED_TOKENS))
    throw new CliError(`--unbounded tokens must be in [1, ${MAX_UNBOUNDED_TOKENS}], got '${spec}'`);
  return { request: Number(m[1]), maxTokens };
}

/** `--abandon 120:500` = the client of workload request 120 hangs up 500 ms after sending it. */
export function parseAbandon(spec: string): { request: number; afterMs: number } {
  const m = /^(\d+):(\d+)$/.exec(spec.trim());
  if (!m) throw new CliError(`--abandon must look like REQUEST:MS (e.g. 120:500), got '${spec}'`);
  return { request: Number(m[1]), afterMs: Number(m[2]) };
}

/** Flags that set one fault each; --random-faults draws them all instead. */
const FAULT_FLAGS = {
  loss: "--loss",
  dup: "--dup",
  reorder: "--reorder",
  reorderMaxMs: "--reorder-max-ms",
  partition: "--partition",
  faultsUntilMs: "--faults-until-ms",
  engineFail: "--engine-fail",
  slowEngine: "--slow-engine",
  slowNode: "--slow-node",
  stall: "--stall",
  refuse: "--refuse",
  lie: "--lie",
  unbounded: "--unbounded",
  abandon: "--abandon",
  crash: "--crash",
  pause: "--pause",
} as const satisfies Partial<Record<keyof SimOptions, string>>;

/** The fault flags, grouped as the simulator takes them (SimFaults); undefined without any. */
export function parseFaultFlags(o: SimOptions, nodes: number, seed: number): SimFaults | undefined {
  const given = (Object.keys(FAULT_FLAGS) as (keyof typeof FAULT_FLAGS)[]).filter((k) => {
    const v = o[k];
    return v !== undefined && !(Array.isArray(v) && v.length === 0);
  });
  if (o.randomFaults !== undefined) {
    if (given.length > 0)
      throw new CliError(
        `--random-faults draws every fault; drop ${given.map((k) => FAULT_FLAGS[k]).join(", ")}`,
      );
    const ms = parseNumber("--random-faults", o.randomFaults, { min: 1, max: 1e12 });
    return faultScheduleFor(seed, nodes, ms);
  }
  const network: NetworkFaults = {};
  if (o.loss !== undefined) network.lossProb = parseNumber("--loss", o.loss, { min: 0, max: 1 });
  if (o.dup !== undefined) network.dupProb = parseNumber("--dup", o.dup, { min: 0, max: 1 });
  if (o.reorder !== undefined) network.reorderProb = parseNumber("--reorder", o.reorder, { min: 0, max: 1 });
  if (o.reorderMaxMs !== undefined)
    network.reorderMaxMs = parseNumber("--reorder-max-ms", o.reorderMaxMs, { min: 0, max: 3_600_000 });
  if (o.faultsUntilMs !== undefined)
    network.untilMs = parseNumber("--faults-until-ms", o.faultsUntilMs, { min: 0, max: 1e12 });
  if (o.partition !== undefined && o.partition.length > 0)
    network.partitions = o.partition.map((s) => parsePartition(s, nodes));
  const engine: EngineFaults = {};
  if (o.engineFail !== undefined)
    engine.failProb = parseNumber("--engine-fail", o.engineFail, { min: 0, max: 1 });
  const slowdowns = [
    ...(o.slowEngine ?? []).map((s) => parseSlowEngine(s, nodes)),
    ...(o.slowNode ?? []).map((s) => parseSlowNode(s, nodes)),
  ];
  if (slowdowns.length > 0) engine.slowdowns = slowdowns;
  const node: NodeFaults = {};
  if (o.crash !== undefined && o.crash.length > 0) node.crashes = o.crash.map((c) => parseCrash(c, nodes));
  if (o.pause !== undefined && o.pause.length > 0) node.pauses = o.pause.map((p) => parsePause(p, nodes));
  if (o.stall !== undefined && o.stall.length > 0)
    node.stalls = o.stall.map((x) => parseMisbehaviour("--stall", x, nodes));
  if (o.refuse !== undefined && o.refuse.length > 0)
    node.refuses = o.refuse.map((x) => parseMisbehaviour("--refuse", x, nodes));
  if (o.lie !== undefined && o.lie.length > 0)
    node.lies = o.lie.map((x) => parseMisbehaviour("--lie", x, nodes));
  const faults: SimFaults = {};
  const client: ClientFaults = {};
  if (o.unbounded !== undefined && o.unbounded.length > 0) client.unbounded = o.unbounded.map(parseUnbounded);
  if (o.abandon !== undefined && o.abandon.length > 0) client.abandon = o.abandon.map(parseAbandon);
  if (Object.keys(client).length > 0) faults.client = client;
  if (Object.keys(network).length > 0) faults.network = network;
  if (Object.keys(engine).length > 0) faults.engine = engine;
  if (Object.keys(node).length > 0) faults.node = node;
  return Object.keys(faults).length > 0 ? faults : undefined;
}

/** Checks every flag; returns the simulator config and the workload choice, or throws CliError. */
export function parseSimOptions(o: SimOptions): {
  config: SimConfig;
  workload: WorkloadChoice;
  mmluDir: string;
  requests: number | undefined;
  rate: number | undefined;
} {
  // The simulator also runs the baselines the daemon refuses (the centralized router).
  const policy = parseFlag(z.enum(ALL_POLICY_NAMES), "policy", o.policy);
  const workload = parseWorkloadChoice(o.workload, o, { openLoop: o.rate !== undefined });
  if (!isProfileName(o.profile))
    throw new CliError(`--profile must be one of ${PROFILE_NAMES.join(", ")}, got '${o.profile}'`);
  const config: SimConfig = {
    nodes: parseNumber("--nodes", o.nodes, { min: 1, max: 1024, integer: true }),
    policy,
    commMs: parseNumber("--comm-ms", o.commMs, { min: 0, max: 3_600_000 }),
    jitterMs: parseNumber("--jitter-ms", o.jitterMs, { min: 0, max: 3_600_000 }),
    pollMs: parseNumber("--poll-ms", o.pollMs, { min: 1, max: 3_600_000 }),
    profile: o.profile,
    seed: parseNumber("--seed", o.seed, { min: 0, max: 2 ** 32 - 1, integer: true }),
    keepRecords: o.json !== undefined,
  };
  if (o.oracle === true) config.oracle = true;
  if (o.gossip !== undefined) {
    if (o.gossip !== "full" && o.gossip !== "scuttlebutt")
      throw new CliError(`--gossip must be full or scuttlebutt, got '${o.gossip}'`);
    config.gossip = o.gossip;
  }
  if (o.maxEstimates !== undefined) {
    if (config.gossip !== "scuttlebutt") throw new CliError("--max-estimates needs --gossip scuttlebutt");
    config.maxEstimates = parseNumber("--max-estimates", o.maxEstimates, {
      min: 1,
      max: 4095,
      integer: true,
    });
  }
  if ((config.oracle || config.policy === "centralized") && config.gossip === "scuttlebutt")
    throw new CliError(
      "--oracle and --policy centralized run with --gossip full only (the oracle pushes full-mesh snapshots)",
    );
  if (o.capacityTokens !== undefined) {
    config.capacityTokens = parseNumber("--capacity-tokens", o.capacityTokens, {
      min: 1,
      max: 1e12,
      integer: true,
    });
  }
  config.node = {};
  // Bounded by the node's own config schema: the bounds are stated once, in src/core/node/config.ts.
  if (o.concurrency !== undefined) config.node.concurrency = nodeSetting("concurrency", o.concurrency);
  if (o.forwardTimeoutMs !== undefined)
    config.node.forwardTimeoutMs = nodeSetting("forwardTimeoutMs", o.forwardTimeoutMs);
  if (o.forwardAckTimeoutMs !== undefined)
    config.node.forwardAckTimeoutMs = nodeSetting("forwardAckTimeoutMs", o.forwardAckTimeoutMs);
  if (o.forwardResends !== undefined)
    config.node.forwardResends = nodeSetting("forwardResends", o.forwardResends);
  if (o.daemonConfig === true) config.daemonConfig = true;
  if (o.deadlineMs !== undefined)
    config.deadlineMs = parseNumber("--deadline-ms", o.deadlineMs, { min: 1, max: 3_600_000, integer: true });
  if (o.nodeConfig !== undefined) Object.assign(config.node, parseNodeConfig(o.nodeConfig, config.policy));
  const faults = parseFaultFlags(o, config.nodes, config.seed);
  if (faults !== undefined) config.faults = faults;
  const requests =
    o.requests === undefined
      ? undefined
      : parseNumber("--requests", o.requests, { min: 1, max: 10_000_000, integer: true });
  const rate =
    o.rate === undefined ? undefined : parseNumber("--rate", o.rate, { min: 0.001, max: 1_000_000 });
  return {
    config,
    workload,
    mmluDir: o.mmluDir ?? DEFAULT_MMLU_DIR,
    requests,
    rate,
  };
}

function fmtBytes(n: number): string {
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)} GB`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(2)} MB`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)} kB`;
  return `${n} B`;
}

/** The human summary; latency percentiles from an HDR histogram (µs resolution, 3 digits). */
export function formatSummary(
  r: SimResult,
  workloadLabel: string,
  bound?: { ideal: number; history?: number },
): string {
  const h = hdr.build({
    lowestDiscernibleValue: 1,
    highestTrackableValue: 3_600_000_000,
    numberOfSignificantValueDigits: 3,
  });
  for (const rec of r.records) if (rec.ok) h.recordValue(Math.max(1, Math.round(rec.latencyMs * 1000)));
  const t = r.totals;
  const haveRecords = r.records.length > 0;
  const p50 = haveRecords ? h.getValueAtPercentile(50) / 1000 : t.p50LatencyMs;
  const p99 = haveRecords ? h.getValueAtPercentile(99) / 1000 : t.p99LatencyMs;
  h.destroy();
  const c = r.config;
  const lines = [
    `prefixmesh sim — ${c.nodes} nodes, policy ${c.policy}, Δcomm ${c.commMs} ± ${c.jitterMs} ms, Δpoll ${c.pollMs} ms, profile ${r.profile.name}, KV ${r.capacityTokens} tokens/node, seed ${c.seed}`,
    `workload ${workloadLabel}: ${t.requests} requests${r.workload.synthetic ? " (SYNTHETIC data)" : ""}`,
    // The label names the mode the run used (`--gossip` over the daemon's default).
    ...(c.daemonConfig
      ? [
          `nodes      as the daemon configures them: ${daemonConfigLabel({ ...c.node, gossip: simGossip(c) })}`,
        ]
      : []),
    ...(simGossip(c) === "scuttlebutt"
      ? [
          `mesh       scuttlebutt: SWIM membership through 2 seeds, digests to 3 members per Δpoll${c.maxEstimates ? `, at most ${c.maxEstimates} estimates` : ""}`,
        ]
      : []),
    ...(c.oracle
      ? ["ORACLE     every estimate = its owner's true tree, instantly and free (simulation-only reference)"]
      : []),
    `latency    mean ${(t.meanLatencyMs / 1000).toFixed(3)} s   p50 ${(p50 / 1000).toFixed(3)} s   p99 ${(p99 / 1000).toFixed(3)} s`,
    `hit rate   expected ${(100 * t.expectedHitRate).toFixed(1)}%   actual ${(100 * t.actualHitRate).toFixed(1)}%` +
      (bound ? `   ideal ${(100 * bound.ideal).toFixed(1)}%` : "") +
      (bound?.history !== undefined ? `   own history ${(100 * bound.history).toFixed(1)}%` : ""),
    `hotspot    ${(100 * t.hotspotShare).toFixed(1)}% of requests on n${t.hotspotNode}   forwarded ${(100 * t.forwardedShare).toFixed(1)}%`,
    `served     ${r.perNode.map((n) => `${n.id}=${n.served}`).join(" ")}`,
    `messages   ${t.messagesTotal} (${fmtBytes(t.bytesTotal)}): ${Object.entries(t.messages)
      .map(([k, v]) => `${k} ${v.count} / ${fmtBytes(v.bytes)}`)
      .join(", ")}`,
    `answered   ${t.answered}/${t.requests}${t.failed ? `, ${t.failed} failed` : ""}${t.incorrect ? `, ${t.incorrect} WRONG` : ""}   fallbacks ${t.fallbacks}   late replies ${t.lateReplies}`,
    `engine     ${t.engineRuns} runs, ${t.duplicateRuns} duplicate, ${aborted(t)}, busy ${(t.engineBusyMs / 1000).toFixed(1)} s   forwards cancelled ${t.cancelledForwards}, refused by deadline ${t.rejectedDeadline}`,
    `acks       ${t.ackTimeouts} ack timeouts, ${t.probes} probes, ${t.resends} unacked re-sends, ${t.resentAnswers} answers re-sent`,
    `simulated  ${(r.virtualMs / 1000).toFixed(1)} s virtual in ${(r.wallMs / 1000).toFixed(2)} s wall (${Math.round(t.requests / (r.wallMs / 1000))} requests/s, ${r.events} events)`,
  ];
  const f = c.faults;
  if (f) {
    const n = f.network ?? {};
    const crashes = r.perNode.reduce((k, x) => k + x.crashes, 0);
    lines.push(
      `faults     loss ${n.lossProb ?? 0}, duplication ${n.dupProb ?? 0}, reordering ${n.reorderProb ?? 0}, partitions ${n.partitions?.length ?? 0}, engine failures ${f.engine?.failProb ?? 0}, slow engines ${f.engine?.slowdowns?.length ?? 0}, crashes ${crashes}, pauses ${f.node?.pauses?.length ?? 0}, stalling peers ${f.node?.stalls?.length ?? 0}, refusing peers ${f.node?.refuses?.length ?? 0}, lying peers ${f.node?.lies?.length ?? 0}, unbounded requests ${f.client?.unbounded?.length ?? 0}, clients gone ${t.abandoned ?? 0}, client re-submissions ${t.retries}`,
      `schedule   ${faultFlags(f).join(" ")}`,
    );
  }
  return `${lines.join("\n")}\n`;
}

export async function runSimCommand(
  o: SimOptions,
  io: { out: NodeJS.WritableStream; err: NodeJS.WriteStream },
): Promise<SimResult> {
  const { config, workload, mmluDir, requests, rate } = parseSimOptions(o);
  const w = await loadWorkload(workload, { dir: mmluDir, seed: config.seed, requests, openLoopRate: rate });
  const useBar = io.err.isTTY === true;
  const bar = useBar
    ? new SingleBar({ stream: io.err, format: "simulating [{bar}] {value}/{total} requests" })
    : undefined;
  bar?.start(w.requests.length, 0);
  // The summary needs per-request latencies for HDR percentiles.
  const result = runSimulation({ ...config, keepRecords: true }, w, {
    onProgress: (done) => bar?.update(done),
  });
  bar?.stop();
  io.out.write(
    formatSummary(result, w.meta ? `${w.name} (${w.meta.schedule})` : w.name, hitBounds(w, result)),
  );
  if (o.json !== undefined) {
    try {
      await writeFile(o.json, `${JSON.stringify({ ...result, config })}\n`);
    } catch (err) {
      throw new CliError(`cannot write --json file '${o.json}': ${(err as Error).message}`);
    }
    io.out.write(`wrote ${o.json}\n`);
  }
  return result;
}

/**
 * DAEMON_NODE_DEFAULTS as the help states them; for a run (`over`: its node flags), the node settings
 * it ran with (the policy is on the summary's first line).
 */
/** `--node-config`: a JSON object of node settings, checked by the node's own schema. */
function parseNodeConfig(json: string, policy: string): NonNullable<SimConfig["node"]> {
  let v: unknown;
  try {
    v = JSON.parse(json);
  } catch {
    throw new CliError("--node-config must be a JSON object");
  }
  if (typeof v !== "object" || v === null || Array.isArray(v))
    throw new CliError("--node-config must be a JSON object");
  for (const k of ["id", "peers", "policy", "capacityTokens", "pollMs"])
    if (k in v) throw new CliError(`--node-config: ${k} is set by the simulator's own flags`);
  const r = nodeConfigSchema.safeParse({ id: "n0", capacityTokens: 1, ...v, policy });
  if (!r.success)
    throw new CliError(
      `--node-config: ${r.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`,
    );
  return v as NonNullable<SimConfig["node"]>;
}

function daemonConfigLabel(over?: SimConfig["node"]): string {
  const entries = Object.entries(
    over === undefined ? DAEMON_NODE_DEFAULTS : { ...DAEMON_NODE_DEFAULTS, ...over },
  );
  return entries
    .filter(([k]) => over === undefined || k !== "policy")
    .map(([k, v]) => `${k} ${v}`)
    .join(", ");
}

/**
 * The ideal hit rate over the requests in the order they were sent (an open-loop chat's follow-ups
 * go out when their predecessor is answered, so only the run knows that order), and for chat the
 * share a conversation's own history alone would give.
 */
function hitBounds(w: Workload, r: SimResult): { ideal: number; history?: number } | undefined {
  if (r.records.length !== w.requests.length) return undefined;
  const order = r.records
    .map((rec) => [rec.startMs, rec.index] as const)
    .sort((a, b) => a[0] - b[0] || a[1] - b[1])
    .map(([, i]) => i);
  const ideal = hitRate(w.requests, idealHits(w.requests, order));
  return w.meta?.chat ? { ideal, history: hitRate(w.requests, historyHits(w.requests)) } : { ideal };
}

/** A node-config number from its flag (`--forward-ack-timeout-ms` for forwardAckTimeoutMs), checked by the schema. */
function nodeSetting(key: NodeConfigNumberKey, raw: string): number {
  return parseFlag(nodeConfigNumber(key), key, raw);
}

export function registerSim(program: Command): void {
  const cmd = program
    .command("sim")
    .description("Run the deterministic discrete-event simulator of a prefixmesh cluster")
    .option("--nodes <n>", "number of nodes", "4")
    .option(
      "--policy <name>",
      `routing policy: ${ALL_POLICY_NAMES.join(" | ")} (affinity = the paper's Algorithm 1; centralized = a baseline, SGLang's cache_aware with a global view via the oracle)`,
      DEFAULT_POLICY,
    )
    .option("--comm-ms <ms>", "Δcomm: one-way network delay", "2")
    .option("--jitter-ms <ms>", "uniform jitter on Δcomm (±)", "0.5")
    .option("--poll-ms <ms>", "Δpoll: anti-entropy period", "500")
    .option("--workload <name>", `workload: ${WORKLOADS.join(" | ")}`, "synthetic")
    .option("--mmlu-dir <dir>", "MMLU CSV folder (dev/, test/)", DEFAULT_MMLU_DIR);
  addWorkloadOptions(cmd)
    .option("--requests <n>", "number of requests (default: the whole workload)")
    .option("--seed <s>", "seed of the schedule and of the simulation", "1")
    .option("--profile <name>", `engine cost profile: ${PROFILE_NAMES.join(" | ")}`, DEFAULT_PROFILE)
    .option("--capacity-tokens <n>", "KV capacity per node in tokens (default: the profile's)")
    .option(
      "--concurrency <n>",
      `requests each node runs at once ${defaultNote(N.concurrency)}; 1 = batching-free`,
    )
    .option("--loss <p>", "probability each message is lost")
    .option("--dup <p>", "probability each message is duplicated")
    .option("--reorder <p>", "probability each message gets an extra random delay (reordering)")
    .option(
      "--partition <spec...>",
      "partition that heals: GROUP/GROUP@START_MS:END_MS, e.g. 0,1/2,3@60000:120000 (repeatable)",
    )
    .option("--reorder-max-ms <ms>", "largest extra delay of a reordered message (default 10 × (Δcomm + 1))")
    .option("--faults-until-ms <ms>", "loss/duplication/reordering stop at this virtual time")
    .option("--engine-fail <p>", "probability each engine run fails")
    .option(
      "--slow-engine <spec...>",
      "slow a node's engine: NODExFACTOR[@START_MS:END_MS], e.g. 1x3@10000:20000 (repeatable)",
    )
    .option(
      "--slow-node <spec...>",
      "one node FACTOR × slower for the whole run: NODE:FACTOR, e.g. 1:10 (repeatable)",
    )
    .option(
      "--stall <spec...>",
      "a stalling peer: acks forwards and never answers them: NODE[@START_MS:END_MS] (repeatable)",
    )
    .option(
      "--refuse <spec...>",
      "a refusing peer: answers every forward with a 503: NODE[@START_MS:END_MS] (repeatable)",
    )
    .option(
      "--lie <spec...>",
      "a lying peer: its answers to forwards carry wrong text: NODE[@START_MS:END_MS] (repeatable)",
    )
    .option(
      "--unbounded <spec...>",
      "an unbounded request: workload request INDEX asks for TOKENS output tokens (no max_tokens): INDEX:TOKENS (repeatable)",
    )
    .option(
      "--abandon <spec...>",
      "a client hanging up: workload request INDEX's client leaves MS (virtual) after sending it, unanswered: INDEX:MS (repeatable)",
    )
    .option("--crash <spec...>", "crash a node: NODE@MS[:RESTART_MS] (virtual ms; repeatable)")
    .option(
      "--pause <spec...>",
      "freeze a node, then resume it (peers may wrongly suspect it): NODE@MS:UNTIL_MS (repeatable)",
    )
    .option(
      "--random-faults <ms>",
      "draw every fault class over [0, MS) of virtual time from --seed (printed; instead of the fault flags)",
    )
    .option(
      "--daemon-config",
      `run the nodes as \`prefixmesh node\` does by default (${daemonConfigLabel()}); --policy and the node flags still apply`,
    )
    .option(
      "--deadline-ms <ms>",
      "every client request carries this deadline (the API's x-prefixmesh-deadline-ms); a refused request is re-submitted up to 3 times, then counted failed",
    )
    .option(
      "--node-config <json>",
      'any node settings (src/core/node/config.ts) as a JSON object, over the defaults and the node flags, e.g. \'{"freshPeerLoad":true,"advertiseCosts":false}\'',
    )
    .option(
      "--forward-timeout-ms <ms>",
      `give up on a forward after this long ${defaultNote(N.forwardTimeoutMs)}`,
    )
    .option(
      "--forward-ack-timeout-ms <ms>",
      `floor of the wait for a forward's ack: max(this, 4 × RTT) ${defaultNote(N.forwardAckTimeoutMs)}, ${DAEMON_NODE_DEFAULTS.forwardAckTimeoutMs} with --daemon-config; ≥ the forward timeout: acks off`,
    )
    .option(
      "--forward-resends <n>",
      `re-send an unacked forward this often before falling back ${defaultNote(N.forwardResends)}`,
    )
    .option("--rate <req/s>", "open loop: Poisson arrivals at this rate (default: closed loop, the paper)")
    .option("--oracle", "simulation-only reference: estimates always equal the owners' true trees, free")
    .option(
      "--gossip <mode>",
      "full (default, the paper's full mesh) or scuttlebutt (SWIM membership + digest anti-entropy)",
    )
    .option("--max-estimates <m>", "with --gossip scuttlebutt: keep estimates of at most m members")
    .option("--json <file>", "also write the full result (config, totals, per-request records) as JSON")
    .action(async (opts: SimOptions) => {
      await runSimCommand(opts, { out: process.stdout, err: process.stderr });
    });
}

/** Runs aborted (nobody took the answer), by reason. */
function aborted(t: SimResult["totals"]): string {
  const n = t.abortedClientGone + t.abortedHedged + t.abortedCancelled;
  if (n === 0) return "0 aborted";
  return `${n} aborted (client gone ${t.abortedClientGone}, hedged ${t.abortedHedged}, cancelled ${t.abortedCancelled})`;
}
