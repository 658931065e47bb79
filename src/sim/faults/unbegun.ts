/**
 * Faults scheduled after every request was answered: nothing they could do reaches a request, so a run
 * that checks no convergence does not wait for them (else a crash far past the workload runs the
 * simulator to its safety stop).
 */
import { faultsEnd } from "../fault-schedule.js";
import type { SimFaults } from "../types.js";
import { engineFaultFlags } from "./engine.js";
import { nodeFaultFlags } from "./node.js";

type Scheduled = Pick<SimFaults, "network" | "engine" | "node">;

/**
 * The schedule less what starts after `t` (a crash whose restart comes later stays down) and less the
 * link faults (they hold no stop without settling: the run just ends while they last).
 */
export function faultsBegunBy<F extends Scheduled>(f: F, t: number): F {
  const out: F = { ...f };
  const parts = f.network?.partitions;
  if (f.network) out.network = { partitions: (parts ?? []).filter((p) => p.startMs <= t) };
  const nd = f.node;
  if (nd) {
    const crashes = (nd.crashes ?? [])
      .filter((c) => c.atMs <= t)
      .map((c) => (c.restartAtMs !== undefined && c.restartAtMs > t ? { node: c.node, atMs: c.atMs } : c));
    out.node = { ...nd, crashes, pauses: (nd.pauses ?? []).filter((p) => p.atMs <= t) };
  }
  return out;
}

/** What of the schedule starts after `t`, as `prefixmesh sim` would name it; empty when all began. */
export function faultsAfter(f: Scheduled, t: number): string[] {
  const out: string[] = [];
  for (const p of f.network?.partitions ?? [])
    if (p.startMs > t)
      out.push(`--partition ${p.groups.map((g) => g.join(",")).join("/")}@${p.startMs}:${p.endMs}`);
  for (const c of f.node?.crashes ?? []) {
    const spec = `${c.node}@${c.atMs}${c.restartAtMs === undefined ? "" : `:${c.restartAtMs}`}`;
    if (c.atMs > t) out.push(`--crash ${spec}`);
    else if (c.restartAtMs !== undefined && c.restartAtMs > t)
      out.push(`the restart of --crash ${spec} (n${c.node} stays down)`);
  }
  for (const p of f.node?.pauses ?? []) if (p.atMs > t) out.push(`--pause ${p.node}@${p.atMs}:${p.untilMs}`);
  // Windowed ones hold no stop either way, but one that opens after it never happened: say so too.
  const late = <X extends { atMs?: number }>(xs: X[] | undefined) =>
    (xs ?? []).filter((x) => (x.atMs ?? 0) > t);
  const nd = f.node;
  const flags = [
    ...nodeFaultFlags({ stalls: late(nd?.stalls), refuses: late(nd?.refuses), lies: late(nd?.lies) }),
    ...engineFaultFlags({ slowdowns: late(f.engine?.slowdowns) }),
  ];
  for (let i = 0; i < flags.length; i += 2) out.push(`${flags[i]} ${flags[i + 1]}`);
  return out;
}

/**
 * When a run whose last request was answered at `lastMs` stops: `settleMs` after the faults are over.
 * With settling (convergence checks) that is every fault (link faults without an end: not waited for);
 * without, the crashes, pauses and partitions begun by then (one that ends later holds the stop, so
 * what begins meanwhile happens too); `never` lists the rest.
 */
export function faultsOverAt(
  f: Scheduled,
  lastMs: number,
  settleMs: number,
): { stopMs: number; never: string[] } {
  const stop = (end: number) => Math.max(lastMs, Number.isFinite(end) ? end : lastMs) + settleMs;
  if (settleMs > 0) return { stopMs: stop(faultsEnd(f)), never: [] };
  let end = lastMs;
  for (let next = faultsEnd(faultsBegunBy(f, end)); next > end && Number.isFinite(next); ) {
    end = next;
    next = faultsEnd(faultsBegunBy(f, end));
  }
  return { stopMs: end, never: faultsAfter(f, end) };
}
