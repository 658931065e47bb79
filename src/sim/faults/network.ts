/**
 * Faults of the network between the nodes: loss, duplication, reordering (an extra random delay)
 * and partitions that heal. Their shape, how a seed draws them, the `prefixmesh sim` flags that
 * replay them and their checks live here; the simulated network (../network.ts) applies them.
 */
import { checkProb, type FaultDraw } from "./draw.js";

/** A partition that heals: while active, nodes in different groups cannot exchange messages. */
export interface SimPartition {
  startMs: number;
  endMs: number;
  /** Node indexes per group; nodes not listed form their own singleton groups. */
  groups: number[][];
}

/** Faults of the network between the nodes (network.ts). */
export interface NetworkFaults {
  /** Probability each message is lost. */
  lossProb?: number;
  /** Probability each message is delivered twice (independent delays). */
  dupProb?: number;
  /** Probability a message gets an extra random delay in [0, reorderMaxMs) (so it overtakes/gets overtaken). */
  reorderProb?: number;
  reorderMaxMs?: number;
  /** Link faults (loss, duplication, reordering) stop at this time; default: never. */
  untilMs?: number;
  partitions?: SimPartition[];
}

export function drawNetworkFaults(x: FaultDraw, nodes: number): NetworkFaults {
  const { rng, durationMs: d } = x;
  const network: NetworkFaults = {};
  const loss = x.prob(0.5, 0.15);
  const dup = x.prob(0.4, 0.1);
  const reorder = x.prob(0.4, 0.3);
  if (loss > 0) network.lossProb = loss;
  if (dup > 0) network.dupProb = dup;
  if (reorder > 0) {
    network.reorderProb = reorder;
    network.reorderMaxMs = 1 + rng.int(100);
  }
  if (loss + dup + reorder > 0) network.untilMs = x.ms(rng.range(0.3, 1) * d);
  const partitions: SimPartition[] = [];
  const partitionCount = nodes < 2 ? 0 : rng.int(3);
  for (let i = 0; i < partitionCount; i++) {
    const startMs = x.ms(rng.range(0, 0.9) * d);
    const endMs = x.endOf(startMs, rng.range(0.05, 0.3) * d);
    partitions.push({ startMs, endMs, groups: splitNodes(x, nodes) });
  }
  if (partitions.length > 0) network.partitions = partitions;
  return network;
}

/** 2 groups (sometimes 3) of a random order of the nodes, none empty. */
function splitNodes({ rng }: FaultDraw, nodes: number): number[][] {
  const order = rng.shuffle(Array.from({ length: nodes }, (_, k) => k));
  const parts = nodes >= 3 && rng.chance(0.3) ? 3 : 2;
  const cuts = new Set<number>();
  while (cuts.size < parts - 1) cuts.add(1 + rng.int(nodes - 1));
  const at = [0, ...[...cuts].sort((a, b) => a - b), nodes];
  return at.slice(1).map((end, i) => order.slice(at[i], end).sort((a, b) => a - b));
}

export function networkFaultFlags(n: NetworkFaults): string[] {
  const out: string[] = [];
  if (n.lossProb !== undefined) out.push("--loss", String(n.lossProb));
  if (n.dupProb !== undefined) out.push("--dup", String(n.dupProb));
  if (n.reorderProb !== undefined) out.push("--reorder", String(n.reorderProb));
  if (n.reorderMaxMs !== undefined) out.push("--reorder-max-ms", String(n.reorderMaxMs));
  if (n.untilMs !== undefined) out.push("--faults-until-ms", String(n.untilMs));
  for (const p of n.partitions ?? [])
    out.push("--partition", `${p.groups.map((g) => g.join(",")).join("/")}@${p.startMs}:${p.endMs}`);
  return out;
}

export function checkNetworkFaults(f: NetworkFaults, bad: (m: string) => never): void {
  checkProb("network.lossProb", f.lossProb, bad);
  checkProb("network.dupProb", f.dupProb, bad);
  checkProb("network.reorderProb", f.reorderProb, bad);
}

/** When the network's faults are over (link faults without an end: never). */
export function networkFaultsEnd(f: NetworkFaults): number {
  let end = f.untilMs ?? (f.lossProb || f.dupProb || f.reorderProb ? Number.POSITIVE_INFINITY : 0);
  for (const p of f.partitions ?? []) end = Math.max(end, p.endMs);
  return end;
}
