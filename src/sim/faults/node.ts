/**
 * Faults of the node processes: crashes (cache, queue and pending requests lost; a restart in a new
 * epoch) and pauses (a frozen process). Their shape, how a seed draws them, the `prefixmesh sim` flags
 * that replay them, their checks and the pause arithmetic a run applies (`NodeFaultModel`) live here;
 * the run (../run.ts) schedules the crashes and restarts.
 */
import { byNode, checkNode, type FaultDraw } from "./draw.js";

/** Crash node `node` at `atMs` (cache, queue and pending requests lost); restart at `restartAtMs`. */
export interface SimCrash {
  node: number;
  atMs: number;
  restartAtMs?: number;
}

/**
 * Node `node` freezes in [atMs, untilMs) (a GC pause, SIGSTOP, a swapped-out process): it handles
 * nothing — messages, timers, engine completions, clients and a restart wait — then resumes where it
 * was, same epoch. Its peers' failure detectors wrongly suspect a node that is alive.
 */
export interface SimPause {
  node: number;
  atMs: number;
  untilMs: number;
}

/** Faults of the node processes. */
export interface NodeFaults {
  crashes?: SimCrash[];
  pauses?: SimPause[];
}

export function drawNodeFaults(x: FaultDraw, nodes: number): NodeFaults {
  const { rng, durationMs: d } = x;
  const node: NodeFaults = {};
  // Crashes hit distinct nodes; at most one stays down, and never the last one up.
  const crashes: SimCrash[] = [];
  const crashCount = Math.min(rng.int(3), nodes);
  const victims = rng.shuffle(Array.from({ length: nodes }, (_, k) => k)).slice(0, crashCount);
  for (const [i, victim] of victims.entries()) {
    const atMs = x.ms(rng.range(0, 0.8) * d);
    const forGood = nodes >= 2 && i === 0 && rng.chance(0.15);
    crashes.push(
      forGood
        ? { node: victim, atMs }
        : { node: victim, atMs, restartAtMs: x.endOf(atMs, rng.range(0.02, 0.3) * d) },
    );
  }
  if (crashes.length > 0) node.crashes = crashes;
  if (rng.chance(0.3)) {
    const atMs = x.ms(rng.range(0, 0.8) * d);
    node.pauses = [{ node: rng.int(nodes), atMs, untilMs: x.endOf(atMs, rng.range(0.02, 0.2) * d) }];
  }
  return node;
}

export function nodeFaultFlags(nd: NodeFaults): string[] {
  const out: string[] = [];
  for (const c of nd.crashes ?? [])
    out.push("--crash", `${c.node}@${c.atMs}${c.restartAtMs === undefined ? "" : `:${c.restartAtMs}`}`);
  for (const p of nd.pauses ?? []) out.push("--pause", `${p.node}@${p.atMs}:${p.untilMs}`);
  return out;
}

export function checkNodeFaults(f: NodeFaults, nodes: number, bad: (m: string) => never): void {
  for (const cr of f.crashes ?? []) {
    checkNode("crash", cr.node, nodes, bad);
    if (cr.restartAtMs !== undefined && !(cr.restartAtMs > cr.atMs)) bad(`restartAtMs must follow atMs`);
  }
  for (const p of f.pauses ?? []) {
    checkNode("pause", p.node, nodes, bad);
    if (!(p.atMs >= 0 && p.untilMs > p.atMs && Number.isFinite(p.untilMs)))
      bad(`a pause must end (untilMs finite) after it starts (atMs ≥ 0), got ${p.atMs}-${p.untilMs}`);
  }
}

/** When the node faults are over: the last restart, crash or pause end. */
export function nodeFaultsEnd(f: NodeFaults): number {
  let end = 0;
  for (const c of f.crashes ?? []) end = Math.max(end, c.restartAtMs ?? c.atMs);
  for (const p of f.pauses ?? []) end = Math.max(end, p.untilMs);
  return end;
}

/** The node faults of one run, as the run applies them. */
export class NodeFaultModel {
  private readonly pauses: SimPause[][] | undefined;

  constructor(
    readonly faults: NodeFaults,
    nodes: number,
  ) {
    this.pauses = byNode(nodes, faults.pauses);
  }

  /** Whether any node ever pauses (so events must be checked against pauses at all). */
  get hasPauses(): boolean {
    return this.pauses !== undefined;
  }

  /** When node `node` resumes if it is frozen at `now`, else -1 (back-to-back pauses: the last end). */
  pausedUntil(node: number, now: number): number {
    const list = this.pauses?.[node];
    let until = -1;
    for (let again = true; again; ) {
      again = false;
      const t = until < 0 ? now : until;
      for (const p of list ?? []) {
        if (t >= p.atMs && t < p.untilMs && p.untilMs > until) {
          until = p.untilMs;
          again = true;
        }
      }
    }
    return until;
  }
}
