/**
 * `prefixmesh experiment faults`: every fault class through the simulator in the configuration the
 * daemon ships (DAEMON_NODE_DEFAULTS), closed and open loop, on the same seeded MMLU schedules, each
 * beside the fault-free run of the same loop. Runs one after another in this thread: a run of 10,000
 * requests takes seconds, and the machine is shared.
 */
import { DAEMON_NODE_DEFAULTS } from "../../core/node/config.js";
import { DEFAULT_PROFILE } from "../../engines/sim/profiles.js";
import { nodeSettingsSchema } from "../../server/settings/index.js";
import { runSimulation } from "../../sim/run.js";
import type { SimConfig, SimResult } from "../../sim/types.js";
import { mmluWorkload } from "../../workload/mmlu-workload.js";
import { syntheticMmlu } from "../../workload/synthetic.js";
import type { Workload } from "../../workload/types.js";
import type { WorkloadSource } from "../workloads.js";
import {
  type ClassContext,
  type ClassSetup,
  FAULT_CLASSES,
  FAULT_FREE,
  type FaultClass,
  INVESTIGATIONS,
  WITHOUT_BAD_PEER,
} from "./classes.js";
import { type FaultRunResult, type Loop, measureRun } from "./measure.js";

/** The daemon's anti-entropy period and chat max_tokens default, as its settings default them. */
export const POLL_MS = nodeSettingsSchema.shape.pollMs.def.defaultValue as number;
export const CHAT_MAX_TOKENS_DEFAULT = nodeSettingsSchema.shape.chatMaxTokensDefault.def
  .defaultValue as number;
/** Δcomm of every run: the paper's 2 ms ± 0.5 ms. */
export const COMM_MS = 2;
export const JITTER_MS = 0.5;
export const NODES = 4;

export interface FaultsOptions {
  source: WorkloadSource;
  seed: number;
  /** Requests per run (each loop). */
  requests: number;
  /** Open-loop Poisson arrival rate, requests/s (the 6 req/s). */
  openRate: number;
  /**
   * A subset (`--classes`): only these classes (ids), each beside the fault-free run of its loop; no
   * investigations. Undefined: every class.
   */
  classes?: readonly string[];
  /** Only these loops (`--loops`); undefined: both. */
  loops?: readonly Loop[];
  /** Node settings over the daemon's in every run (`--set`), e.g. to compare a setting off and on. */
  node?: SimConfig["node"];
  onPhase?(phase: string): void;
  onProgress?(done: number, total: number): void;
}

export interface FaultsOutcome {
  runs: FaultRunResult[];
  /** What each class did, per loop (its `what` line and window). */
  setups: { classId: string; label: string; loop: Loop; setup: ClassSetup }[];
  seed: number;
  requests: number;
  openRate: number;
  synthetic: boolean;
  workloadName: string;
  meanPromptTokens: number;
  /** The node settings every run started from (DAEMON_NODE_DEFAULTS when it ran): the report names them. */
  daemonDefaults: Record<string, unknown>;
  wallMs: number;
}

async function buildWorkloads(o: FaultsOptions): Promise<Record<Loop, Workload>> {
  const make = async (rate?: number): Promise<Workload> => {
    const choice = {
      seed: o.seed,
      requests: o.requests,
      ...(rate !== undefined ? { openLoopRate: rate } : {}),
    };
    const w =
      o.source.kind === "mmlu"
        ? await mmluWorkload({
            dir: o.source.dir,
            ...choice,
            ...(o.source.cacheDir ? { cacheDir: o.source.cacheDir } : {}),
          })
        : syntheticMmlu({ scale: o.source.scale, ...choice });
    // MMLU is evaluated greedily: every request is deterministic (what spot checks recompute).
    return { ...w, requests: w.requests.map((r) => ({ ...r, temperature: 0 })) };
  };
  return { closed: await make(), open: await make(o.openRate) };
}

/** The classes a run (or `--classes` subset) takes; throws on an unknown id. */
export function selectedClasses(ids: readonly string[] | undefined): FaultClass[] {
  if (ids === undefined) return [WITHOUT_BAD_PEER, ...FAULT_CLASSES];
  const all = [WITHOUT_BAD_PEER, ...FAULT_CLASSES];
  return ids
    .filter((id) => id !== FAULT_FREE.id)
    .map((id) => {
      const c = all.find((x) => x.id === id);
      if (c === undefined)
        throw new RangeError(`unknown fault class ${id}: one of ${all.map((x) => x.id).join(", ")}`);
      return c;
    });
}

export function simConfigOf(setup: ClassSetup, seed: number): SimConfig {
  return {
    nodes: setup.nodes ?? NODES,
    policy: DAEMON_NODE_DEFAULTS.policy,
    daemonConfig: true,
    commMs: COMM_MS,
    jitterMs: JITTER_MS,
    pollMs: POLL_MS,
    profile: DEFAULT_PROFILE,
    seed,
    keepRecords: true,
    ...(setup.faults ? { faults: setup.faults } : {}),
    ...(setup.node ? { node: setup.node } : {}),
  };
}

export async function runFaults(o: FaultsOptions): Promise<FaultsOutcome> {
  const t0 = performance.now();
  // A mistyped --classes id is told at once, not after the workloads are built.
  const classes = selectedClasses(o.classes);
  o.onPhase?.("building workloads");
  const workloads = await buildWorkloads(o);
  const investigations = o.classes === undefined ? INVESTIGATIONS : [];
  const loops = o.loops ?? (["closed", "open"] as const);
  const perLoop = 1 + classes.length;
  const total = (loops.length * perLoop + investigations.length) * o.requests;
  let done = 0;
  const runs: FaultRunResult[] = [];
  const setups: FaultsOutcome["setups"] = [];
  const simulate = (setup: ClassSetup, w: Workload): SimResult => {
    const base = done;
    const c = simConfigOf(setup, o.seed);
    if (o.node !== undefined) c.node = { ...c.node, ...o.node };
    const r = runSimulation(c, w, {
      onProgress: (d) => o.onProgress?.(base + d, total),
    });
    done = base + w.requests.length;
    return r;
  };
  for (const loop of loops) {
    const w = workloads[loop];
    o.onPhase?.(`simulating ${loop} loop`);
    // The fault-free run places no fault: its span T is what the others' faults are placed in.
    const ctx: ClassContext = {
      spanMs: 0,
      requests: w.requests.length,
      promptTokens: (i) => w.requests[i]?.tokens.length ?? 0,
      chatMaxTokensDefault: CHAT_MAX_TOKENS_DEFAULT,
    };
    const ffSetup = FAULT_FREE.setup(ctx);
    const faultFree = simulate(ffSetup, w);
    for (const x of faultFree.records) ctx.spanMs = Math.max(ctx.spanMs, x.endMs);
    const record = (c: FaultClass, setup: ClassSetup, r: SimResult) => {
      runs.push(measureRun({ classId: c.id, loop }, setup, r, c === FAULT_FREE ? undefined : faultFree));
      setups.push({ classId: c.id, label: c.label, loop, setup });
    };
    record(FAULT_FREE, ffSetup, faultFree);
    for (const c of classes) {
      const setup = c.setup(ctx);
      record(c, setup, simulate(setup, w));
    }
    if (loop !== "open") continue;
    for (const inv of investigations) {
      const c = FAULT_CLASSES.find((x) => x.id === inv.base) as FaultClass;
      const base = c.setup(ctx);
      const setup = { ...base, node: { ...base.node, ...inv.node } };
      record({ ...c, id: inv.id, label: inv.label }, setup, simulate(setup, w));
    }
  }
  const w = workloads.closed;
  return {
    runs,
    setups,
    seed: o.seed,
    requests: o.requests,
    openRate: o.openRate,
    synthetic: w.synthetic,
    workloadName: w.name,
    meanPromptTokens: w.meta?.meanPromptTokens ?? 0,
    daemonDefaults: { ...DAEMON_NODE_DEFAULTS, ...o.node },
    wallMs: performance.now() - t0,
  };
}
