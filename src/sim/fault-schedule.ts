/**
 * Fault schedules drawn from a seed: one seed gives one reproducible schedule of every fault class
 * (network, engine, node), each class present or not, every probability, time, window and group
 * drawn. The draws come from a stream of their own (not the simulation's), so the same seed can drive
 * the run, the workload and its faults without the three being correlated; and values are rounded
 * (probabilities to 3 decimals, times to whole ms) so the schedule as printed is the schedule.
 */
import { hashString, Prng } from "../core/prng.js";
import type { EngineFaults, NetworkFaults, NodeFaults, SimCrash, SimFaults, SimPartition } from "./types.js";

const round3 = (x: number): number => Math.round(x * 1000) / 1000;

/** A fault schedule over [0, durationMs) of virtual time for `nodes` nodes, drawn from `seed`. */
export function faultScheduleFor(seed: number, nodes: number, durationMs: number): SimFaults {
  if (!Number.isFinite(seed)) throw new RangeError(`seed must be a number, got ${seed}`);
  if (!Number.isInteger(nodes) || nodes < 1 || nodes > 1024)
    throw new RangeError(`nodes must be 1-1024, got ${nodes}`);
  if (!(durationMs >= 1 && Number.isFinite(durationMs)))
    throw new RangeError(`durationMs must be ≥ 1 and finite, got ${durationMs}`);
  const rng = new Prng(hashString(`fault-schedule:${seed}`));
  const d = durationMs;
  const ms = (x: number): number => Math.round(x);
  /** The end of a window that opens at `at` (< d) and lasts `len`: within [at + 1, d]. */
  const endOf = (at: number, len: number): number => Math.max(at + 1, Math.min(ms(d), at + ms(len)));
  /** A probability in (0, max), or 0 (the class left out) with probability 1 - present. */
  const prob = (present: number, max: number): number =>
    rng.chance(present) ? Math.max(0.001, round3(rng.next() * max)) : 0;

  const network: NetworkFaults = {};
  const loss = prob(0.5, 0.15);
  const dup = prob(0.4, 0.1);
  const reorder = prob(0.4, 0.3);
  if (loss > 0) network.lossProb = loss;
  if (dup > 0) network.dupProb = dup;
  if (reorder > 0) {
    network.reorderProb = reorder;
    network.reorderMaxMs = 1 + rng.int(100);
  }
  if (loss + dup + reorder > 0) network.untilMs = ms(rng.range(0.3, 1) * d);
  const partitions: SimPartition[] = [];
  const partitionCount = nodes < 2 ? 0 : rng.int(3);
  for (let i = 0; i < partitionCount; i++) {
    const startMs = ms(rng.range(0, 0.9) * d);
    const endMs = endOf(startMs, rng.range(0.05, 0.3) * d);
    partitions.push({ startMs, endMs, groups: splitNodes(rng, nodes) });
  }
  if (partitions.length > 0) network.partitions = partitions;

  const engine: EngineFaults = {};
  const fail = prob(0.3, 0.1);
  if (fail > 0) engine.failProb = fail;
  const slowdowns: NonNullable<EngineFaults["slowdowns"]> = [];
  for (let node = 0; node < nodes; node++) {
    if (!rng.chance(0.2)) continue;
    const factor = Math.round(rng.range(1.5, 6) * 10) / 10;
    if (rng.chance(0.5)) slowdowns.push({ node, factor });
    else {
      const atMs = ms(rng.range(0, 0.8) * d);
      slowdowns.push({ node, factor, atMs, untilMs: endOf(atMs, rng.range(0.1, 0.5) * d) });
    }
  }
  if (slowdowns.length > 0) engine.slowdowns = slowdowns;

  const node: NodeFaults = {};
  // Crashes hit distinct nodes; at most one stays down, and never the last one up.
  const crashes: SimCrash[] = [];
  const crashCount = Math.min(rng.int(3), nodes);
  const victims = rng.shuffle(Array.from({ length: nodes }, (_, k) => k)).slice(0, crashCount);
  for (const [i, victim] of victims.entries()) {
    const atMs = ms(rng.range(0, 0.8) * d);
    const forGood = nodes >= 2 && i === 0 && rng.chance(0.15);
    crashes.push(
      forGood
        ? { node: victim, atMs }
        : { node: victim, atMs, restartAtMs: endOf(atMs, rng.range(0.02, 0.3) * d) },
    );
  }
  if (crashes.length > 0) node.crashes = crashes;
  if (rng.chance(0.3)) {
    const atMs = ms(rng.range(0, 0.8) * d);
    node.pauses = [{ node: rng.int(nodes), atMs, untilMs: endOf(atMs, rng.range(0.02, 0.2) * d) }];
  }

  const faults: SimFaults = {};
  if (Object.keys(network).length > 0) faults.network = network;
  if (Object.keys(engine).length > 0) faults.engine = engine;
  if (Object.keys(node).length > 0) faults.node = node;
  return faults;
}

/** 2 groups (sometimes 3) of a random order of the nodes, none empty. */
function splitNodes(rng: Prng, nodes: number): number[][] {
  const order = rng.shuffle(Array.from({ length: nodes }, (_, k) => k));
  const parts = nodes >= 3 && rng.chance(0.3) ? 3 : 2;
  const cuts = new Set<number>();
  while (cuts.size < parts - 1) cuts.add(1 + rng.int(nodes - 1));
  const at = [0, ...[...cuts].sort((a, b) => a - b), nodes];
  return at.slice(1).map((end, i) => order.slice(at[i], end).sort((a, b) => a - b));
}

/**
 * The schedule as `prefixmesh sim` flags (`--loss 0.05 --crash 1@830:1900 …`): what a failing seed
 * prints, readable and replayable as it stands. Empty for no faults.
 */
export function faultFlags(f: SimFaults | undefined): string[] {
  const out: string[] = [];
  const n = f?.network ?? {};
  if (n.lossProb !== undefined) out.push("--loss", String(n.lossProb));
  if (n.dupProb !== undefined) out.push("--dup", String(n.dupProb));
  if (n.reorderProb !== undefined) out.push("--reorder", String(n.reorderProb));
  if (n.reorderMaxMs !== undefined) out.push("--reorder-max-ms", String(n.reorderMaxMs));
  if (n.untilMs !== undefined) out.push("--faults-until-ms", String(n.untilMs));
  for (const p of n.partitions ?? [])
    out.push("--partition", `${p.groups.map((g) => g.join(",")).join("/")}@${p.startMs}:${p.endMs}`);
  const e = f?.engine ?? {};
  if (e.failProb !== undefined) out.push("--engine-fail", String(e.failProb));
  for (const s of e.slowdowns ?? []) {
    const window =
      s.atMs === undefined && s.untilMs === undefined ? "" : `@${s.atMs ?? 0}:${s.untilMs ?? ""}`;
    out.push("--slow-engine", `${s.node}x${s.factor}${window}`);
  }
  const nd = f?.node ?? {};
  for (const c of nd.crashes ?? [])
    out.push("--crash", `${c.node}@${c.atMs}${c.restartAtMs === undefined ? "" : `:${c.restartAtMs}`}`);
  for (const p of nd.pauses ?? []) out.push("--pause", `${p.node}@${p.atMs}:${p.untilMs}`);
  return out;
}
