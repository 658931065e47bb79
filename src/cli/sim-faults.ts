/** `prefixmesh sim`'s fault flags: each parsed and bounded, then grouped as the simulator takes them. */
import { faultScheduleFor } from "../sim/fault-schedule.js";
import { type ClientFaults, MAX_UNBOUNDED_TOKENS } from "../sim/faults/client.js";
import type { EngineFaults, NetworkFaults, NodeFaults, SimFaults } from "../sim/types.js";
import { CliError, parseNumber } from "./errors.js";

/** The fault flags' raw values, as commander gives them. */
export interface SimFaultOptions {
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
  unauthenticated?: string[];
  randomFaults?: string;
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
  // A factor below 1 would speed the engine up: under a "slow" flag that is a typo (0.5 for "half speed").
  if (!(factor >= 1 && factor <= 1000))
    throw new CliError(`--slow-engine factor must be in [1, 1000] (1x2: twice as slow), got '${spec}'`);
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
  if (!(factor >= 1 && factor <= 1000))
    throw new CliError(`--slow-node factor must be in [1, 1000] (1:2: twice as slow), got '${spec}'`);
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
  unauthenticated: "--unauthenticated",
} as const satisfies Partial<Record<keyof SimFaultOptions, string>>;

/** The fault flags, grouped as the simulator takes them (SimFaults); undefined without any. */
export function parseFaultFlags(o: SimFaultOptions, nodes: number, seed: number): SimFaults | undefined {
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
  // Both shape the link faults only: alone they shape no fault (the end only delays settling), silently.
  if (network.reorderMaxMs !== undefined && network.reorderProb === undefined)
    throw new CliError("--reorder-max-ms applies only with --reorder");
  if (network.untilMs !== undefined && ![o.loss, o.dup, o.reorder].some((x) => x !== undefined))
    throw new CliError("--faults-until-ms applies only with --loss, --dup or --reorder");
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
  if (o.unauthenticated !== undefined && o.unauthenticated.length > 0)
    node.unauthenticated = o.unauthenticated.map((x) =>
      parseNumber("--unauthenticated", x.trim().replace(/^n/, ""), { min: 0, max: nodes - 1, integer: true }),
    );
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
