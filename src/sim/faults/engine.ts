/**
 * Faults of the nodes' engines: runs that fail, and engines slowed by a factor (a slower or throttled
 * accelerator). Their shape, how a seed draws them, the `prefixmesh sim` flags that replay them, their
 * checks and how a run applies them (`EngineFaultModel`) live here.
 */
import type { Prng } from "../../core/prng.js";
import { byNode, checkNode, checkProb, type FaultDraw } from "./draw.js";

/**
 * Node `node`'s engine runs take `factor` × the modelled time (and report it) for runs started in
 * [atMs, untilMs) (default: the whole run): a slower or throttled accelerator.
 */
export interface SimSlowdown {
  node: number;
  factor: number;
  atMs?: number;
  untilMs?: number;
}

/** Faults of the nodes' engines. */
export interface EngineFaults {
  /** Probability an engine run fails (the node reports engine-failed). */
  failProb?: number;
  slowdowns?: SimSlowdown[];
}

export function drawEngineFaults(x: FaultDraw, nodes: number): EngineFaults {
  const { rng, durationMs: d } = x;
  const engine: EngineFaults = {};
  const fail = x.prob(0.3, 0.1);
  if (fail > 0) engine.failProb = fail;
  const slowdowns: SimSlowdown[] = [];
  for (let node = 0; node < nodes; node++) {
    if (!rng.chance(0.2)) continue;
    const factor = Math.round(rng.range(1.5, 6) * 10) / 10;
    if (rng.chance(0.5)) slowdowns.push({ node, factor });
    else {
      const atMs = x.ms(rng.range(0, 0.8) * d);
      slowdowns.push({ node, factor, atMs, untilMs: x.endOf(atMs, rng.range(0.1, 0.5) * d) });
    }
  }
  if (slowdowns.length > 0) engine.slowdowns = slowdowns;
  return engine;
}

export function engineFaultFlags(e: EngineFaults): string[] {
  const out: string[] = [];
  if (e.failProb !== undefined) out.push("--engine-fail", String(e.failProb));
  for (const s of e.slowdowns ?? []) {
    const window =
      s.atMs === undefined && s.untilMs === undefined ? "" : `@${s.atMs ?? 0}:${s.untilMs ?? ""}`;
    out.push("--slow-engine", `${s.node}x${s.factor}${window}`);
  }
  return out;
}

export function checkEngineFaults(f: EngineFaults, nodes: number, bad: (m: string) => never): void {
  checkProb("engine.failProb", f.failProb, bad);
  for (const x of f.slowdowns ?? []) {
    checkNode("slowdown", x.node, nodes, bad);
    if (!(x.factor > 0 && x.factor <= 1_000)) bad(`slowdown factor must be in (0, 1000], got ${x.factor}`);
    if (x.atMs !== undefined && x.untilMs !== undefined && !(x.untilMs > x.atMs))
      bad(`a slowdown must end after it starts, got ${x.atMs}-${x.untilMs}`);
  }
}

/** The engine faults of one run, as the run applies them. */
export class EngineFaultModel {
  private readonly slowdowns: SimSlowdown[][] | undefined;

  constructor(
    private readonly faults: EngineFaults,
    nodes: number,
    /** The stream failures are drawn from (one draw per run, only when failures are on). */
    private readonly rng: Prng,
  ) {
    this.slowdowns = byNode(nodes, faults.slowdowns);
  }

  /** The slowdown factor of node `node`'s engine runs starting at `now` (overlapping ones multiply). */
  slowdown(node: number, now: number): number {
    let f = 1;
    for (const x of this.slowdowns?.[node] ?? []) {
      if (now >= (x.atMs ?? 0) && now < (x.untilMs ?? Number.POSITIVE_INFINITY)) f *= x.factor;
    }
    return f;
  }

  /** Whether the run starting now fails. */
  fails(): boolean {
    return this.faults.failProb !== undefined && this.rng.chance(this.faults.failProb);
  }
}
