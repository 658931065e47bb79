/**
 * Faults of the node processes: crashes (cache, queue and pending requests lost; a restart in a new
 * epoch), pauses (a frozen process), peers that misbehave (stalling: forwards acked and never
 * answered; refusing: every forward answered with a 503; lying: wrong text in its answers) and nodes
 * without the cluster's credential (every member check of or by one answered no). Their
 * shape, how a seed draws them, the `prefixmesh sim` flags that replay them, their checks and the
 * pause and misbehaviour arithmetic a run applies (`NodeFaultModel`) live here; the run (../run.ts,
 * ../effects.ts) schedules the crashes and restarts, and drops, answers or alters the misbehaving peers'
 * messages.
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

/** Node `node` misbehaves as a peer in [atMs, untilMs) (default: the whole run). */
export interface SimMisbehaviour {
  node: number;
  atMs?: number;
  untilMs?: number;
}

/** Faults of the node processes. */
export interface NodeFaults {
  crashes?: SimCrash[];
  pauses?: SimPause[];
  /**
   * Stalling peers: they ack every forward and never answer it (their results and errors are lost
   * on the way out), while their snapshots and their own clients' requests go on as usual.
   */
  stalls?: SimMisbehaviour[];
  /** Refusing peers: every forward they get is answered with a retryable error (an HTTP 503), unrun. */
  refuses?: SimMisbehaviour[];
  /** Lying peers: their answers to forwards carry wrong text (a corrupted or substituted model). */
  lies?: SimMisbehaviour[];
  /**
   * Nodes holding no cluster credential (`gossip: "scuttlebutt"`): every member check of one is
   * answered no, and so is each of its own (its hello requests are refused), as the daemon's would be.
   */
  unauthenticated?: number[];
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
  for (const x of nd.stalls ?? []) out.push("--stall", `${x.node}${misbehaviourWindow(x)}`);
  for (const x of nd.refuses ?? []) out.push("--refuse", `${x.node}${misbehaviourWindow(x)}`);
  for (const x of nd.lies ?? []) out.push("--lie", `${x.node}${misbehaviourWindow(x)}`);
  if ((nd.unauthenticated?.length ?? 0) > 0)
    out.push("--unauthenticated", ...(nd.unauthenticated ?? []).map(String));
  return out;
}

/** `@START_MS:END_MS` of a misbehaviour with a window, as `--stall`/`--refuse`/`--lie` read it; "" for the whole run. */
function misbehaviourWindow(x: SimMisbehaviour): string {
  if (x.atMs === undefined && x.untilMs === undefined) return "";
  return `@${x.atMs ?? 0}:${x.untilMs ?? Number.MAX_SAFE_INTEGER}`;
}

export function checkNodeFaults(f: NodeFaults, nodes: number, bad: (m: string) => never): void {
  for (const cr of f.crashes ?? []) {
    checkNode("crash", cr.node, nodes, bad);
    if (cr.restartAtMs !== undefined && !(cr.restartAtMs > cr.atMs)) bad(`restartAtMs must follow atMs`);
  }
  checkCrashesApart(f.crashes ?? [], bad);
  for (const p of f.pauses ?? []) {
    checkNode("pause", p.node, nodes, bad);
    if (!(p.atMs >= 0 && p.untilMs > p.atMs && Number.isFinite(p.untilMs)))
      bad(`a pause must end (untilMs finite) after it starts (atMs ≥ 0), got ${p.atMs}-${p.untilMs}`);
  }
  for (const n of f.unauthenticated ?? []) checkNode("unauthenticated", n, nodes, bad);
  if (new Set(f.unauthenticated).size !== (f.unauthenticated?.length ?? 0))
    bad(`unauthenticated names a node twice: ${f.unauthenticated?.join(", ")}`);
  for (const x of [...(f.stalls ?? []), ...(f.refuses ?? []), ...(f.lies ?? [])]) {
    checkNode("stall/refuse", x.node, nodes, bad);
    if (x.atMs !== undefined && x.untilMs !== undefined && !(x.untilMs > x.atMs))
      bad(`a stall or refusal must end after it starts, got ${x.atMs}-${x.untilMs}`);
  }
}

/**
 * A node's crashes one after another: the run ignores a crash of a node already down, and the first
 * restart then cut the later window short or undid a crash meant for good, unnoticed.
 */
function checkCrashesApart(crashes: readonly SimCrash[], bad: (m: string) => never): void {
  const sorted = [...crashes].sort((a, b) => a.node - b.node || a.atMs - b.atMs);
  for (let i = 1; i < sorted.length; i++) {
    const prev = sorted[i - 1] as SimCrash;
    const cur = sorted[i] as SimCrash;
    if (prev.node !== cur.node) continue;
    if (prev.restartAtMs === undefined || !(cur.atMs > prev.restartAtMs))
      bad(
        `node ${cur.node} crashes at ${cur.atMs} ms while still down from its crash at ${prev.atMs} ms ` +
          `(${prev.restartAtMs === undefined ? "never restarted" : `restarted at ${prev.restartAtMs} ms`})`,
      );
  }
}

/**
 * When the node faults are over: the last restart, crash or pause end. (A misbehaving peer is not a
 * fault convergence waits out: snapshots and anti-entropy go on while it stalls or refuses.)
 */
export function nodeFaultsEnd(f: NodeFaults): number {
  let end = 0;
  for (const c of f.crashes ?? []) end = Math.max(end, c.restartAtMs ?? c.atMs);
  for (const p of f.pauses ?? []) end = Math.max(end, p.untilMs);
  return end;
}

/** The node faults of one run, as the run applies them. */
export class NodeFaultModel {
  private readonly pauses: SimPause[][] | undefined;
  private readonly stalls: SimMisbehaviour[][] | undefined;
  private readonly refuses: SimMisbehaviour[][] | undefined;
  private readonly lies: SimMisbehaviour[][] | undefined;
  private readonly unauthenticated: ReadonlySet<number>;

  constructor(
    readonly faults: NodeFaults,
    nodes: number,
  ) {
    this.pauses = byNode(nodes, faults.pauses);
    this.stalls = byNode(nodes, faults.stalls);
    this.refuses = byNode(nodes, faults.refuses);
    this.lies = byNode(nodes, faults.lies);
    this.unauthenticated = new Set(faults.unauthenticated);
  }

  /** Whether node `node` holds the cluster's credential (a member check of it, or by it, can pass). */
  authenticated(node: number): boolean {
    return !this.unauthenticated.has(node);
  }

  /** Whether node `node` stalls at `now`: its answers to forwards (results, errors) never leave it. */
  stalling(node: number, now: number): boolean {
    return this.stalls !== undefined && inForce(this.stalls[node], now);
  }

  /** Whether node `node` refuses at `now`: every forward it gets is answered with a 503, unrun. */
  refusing(node: number, now: number): boolean {
    return this.refuses !== undefined && inForce(this.refuses[node], now);
  }

  /** Whether node `node` lies at `now`: its results to forwards carry text that is not the model's. */
  lying(node: number, now: number): boolean {
    return this.lies !== undefined && inForce(this.lies[node], now);
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

/** Whether one of a node's misbehaviours is in force at `now`. */
function inForce(list: readonly SimMisbehaviour[] | undefined, now: number): boolean {
  for (const x of list ?? [])
    if (now >= (x.atMs ?? 0) && now < (x.untilMs ?? Number.POSITIVE_INFINITY)) return true;
  return false;
}
