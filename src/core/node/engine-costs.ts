/**
 * The engine's whole cost model, as a node measures it (calibration at start-up, then every run) and
 * advertises it in its snapshot header (`advertiseCosts`), so each node knows each peer's speed:
 *
 *   prefillMs ≈ fixedMs + msPerUncached × uncached + msPerCached × cached
 *   decodeMs  ≈ msPerOutput × outputTokens
 *
 * Prefill: decayed weighted least squares over the three coefficients (the normal equations, 3 × 3),
 * with the prior as three pseudo-observations that decay like real samples (at 0 tokens, PRIOR_SPAN
 * uncached, PRIOR_SPAN cached) and a tiny non-decaying floor of the same points, so the system stays
 * solvable when every sample has the same shape. A negative slope is noise (more tokens never make a
 * run cheaper): it is clamped to 0 and the rest refitted. Decode: the decayed ratio Σ decodeMs /
 * Σ outputTokens (a least-squares slope through the origin, weighted by tokens).
 *
 * The routing fit (cost-model.ts, `PrefillFit`) stays the paper-era one-variable line; this one is
 * what peers compare each other by. Pure and deterministic: samples in, numbers out.
 */
import type { EngineCosts, Snapshot } from "../snapshot.js";
import { MAX_COST_MS } from "../snapshot.js";
import type { CostPrior } from "./cost-model.js";
import type { Effect } from "./types.js";

/** One engine run as the fit sees it. */
export interface CostSample {
  uncached: number;
  cached: number;
  prefillMs: number;
  outputTokens: number;
  decodeMs: number;
}

const PRIOR_SPAN = 1000;
/**
 * Runs before an uncalibrated fit is believed (advertised, compared): until then the prior's guess
 * still pulls it (weight 2 × 0.98^16 ≈ 1.5 against 14 of data), and equal machines would look unequal.
 */
const MIN_SAMPLES = 16;
const FLOOR_WEIGHT = 1e-6;

export class EngineCostFit {
  /** Σ w·x·xᵀ (upper triangle of 3 × 3, row-major) and Σ w·x·y, x = (1, uncached, cached). */
  private readonly a = new Float64Array(9);
  private readonly b = new Float64Array(3);
  private decodeMs = 0;
  private outputTokens = 0;
  private n = 0;
  private calibrated = false;
  /** `costs()` since the last change to the fit: routing asks for it per candidate. */
  private current: EngineCosts | undefined;

  constructor(
    private readonly prior: CostPrior,
    private readonly decay: number,
  ) {
    this.addPrior(prior.weight / 3);
  }

  private addPrior(w: number): void {
    const p = this.prior;
    this.add(0, 0, p.prefillFixedMs, w);
    this.add(PRIOR_SPAN, 0, p.prefillFixedMs + p.prefillMsPerToken * PRIOR_SPAN, w);
    // Prior for cached tokens: free (what a KV cache is for) until runs say otherwise.
    this.add(0, PRIOR_SPAN, p.prefillFixedMs, w);
  }

  private add(u: number, c: number, y: number, w: number, a = this.a, b = this.b): void {
    const x = [1, u, c];
    for (let i = 0; i < 3; i++) {
      b[i] = (b[i] as number) + w * (x[i] as number) * y;
      for (let j = 0; j < 3; j++)
        a[i * 3 + j] = (a[i * 3 + j] as number) + w * (x[i] as number) * (x[j] as number);
    }
  }

  /**
   * Calibration measured this machine: the prior, a guess, goes (only before any sample; the
   * non-decaying floor still keeps the system solvable).
   */
  dropPrior(): void {
    if (this.n > 0) return;
    this.a.fill(0);
    this.b.fill(0);
    this.calibrated = true;
    this.current = undefined;
  }

  /** Whether the fit stands on data: calibrated, or enough runs to outweigh the prior. */
  get measured(): boolean {
    return this.n > 0 && (this.calibrated || this.n >= MIN_SAMPLES);
  }

  /** One engine run. Anything non-finite or negative is ignored (an engine's numbers, not ours). */
  sample(s: CostSample): void {
    const ok = (v: number) => Number.isFinite(v) && v >= 0;
    if (!ok(s.uncached) || !ok(s.cached) || !ok(s.prefillMs)) return;
    const d = this.decay;
    for (let i = 0; i < 9; i++) this.a[i] = (this.a[i] as number) * d;
    for (let i = 0; i < 3; i++) this.b[i] = (this.b[i] as number) * d;
    this.add(s.uncached, s.cached, s.prefillMs, 1);
    if (ok(s.outputTokens) && ok(s.decodeMs) && s.outputTokens > 0) {
      this.decodeMs = this.decodeMs * d + s.decodeMs;
      this.outputTokens = this.outputTokens * d + s.outputTokens;
    }
    this.n++;
    this.current = undefined;
  }

  get samples(): number {
    return this.n;
  }

  /** Decode ms per output token of our runs so far (undefined before any run produced tokens). */
  get msPerOutput(): number | undefined {
    return this.outputTokens > 0 ? Math.min(MAX_COST_MS, this.decodeMs / this.outputTokens) : undefined;
  }

  /** The current costs (the prior's until samples outweigh it), every field in [0, MAX_COST_MS]. */
  costs(): EngineCosts {
    this.current ??= Object.freeze(this.solve());
    return this.current;
  }

  private solve(): EngineCosts {
    const a = Float64Array.from(this.a);
    const b = Float64Array.from(this.b);
    const p = this.prior;
    const w = FLOOR_WEIGHT / 3;
    this.add(0, 0, p.prefillFixedMs, w, a, b);
    this.add(PRIOR_SPAN, 0, p.prefillFixedMs + p.prefillMsPerToken * PRIOR_SPAN, w, a, b);
    this.add(0, PRIOR_SPAN, p.prefillFixedMs, w, a, b);
    let coef = solve3(a, b) ?? [p.prefillFixedMs, p.prefillMsPerToken, 0];
    // A negative slope is noise: fix it at 0 and refit the others (at most twice).
    for (let k = 0; k < 2 && (coef[1]! < 0 || coef[2]! < 0); k++) {
      const fixed = [coef[1]! < 0, coef[2]! < 0];
      coef = solvePinned(a, b, fixed) ?? [p.prefillFixedMs, p.prefillMsPerToken, 0];
    }
    const clamp = (v: number) => Math.min(MAX_COST_MS, Math.max(0, Number.isFinite(v) ? v : 0));
    return {
      fixedMs: clamp(coef[0] as number),
      msPerUncached: clamp(coef[1] as number),
      msPerCached: clamp(coef[2] as number),
      msPerOutput: clamp(this.outputTokens > 0 ? this.decodeMs / this.outputTokens : 0),
    };
  }
}

/** A peer is taken for at most this many times slower or faster than us. */
export const MAX_SPEED_RATIO = 10;

/**
 * `peer`'s predicted run time over ours for a prompt with `uncached` and `cached` tokens, within
 * [1/MAX_SPEED_RATIO, MAX_SPEED_RATIO]: undefined unless both cost models are usable.
 */
export function runTimeRatio(
  peer: EngineCosts | undefined,
  ours: EngineCosts | undefined,
  uncached: number,
  cached: number,
): number | undefined {
  if (!usableCosts(peer) || !usableCosts(ours)) return undefined;
  const p = predictRunMs(peer, uncached, cached);
  const s = predictRunMs(ours, uncached, cached);
  if (!(p > 0) || !(s > 0)) return undefined;
  return Math.min(MAX_SPEED_RATIO, Math.max(1 / MAX_SPEED_RATIO, p / s));
}

/** Expected engine time (prefill + decode) of a run under `c`. */
export function predictRunMs(c: EngineCosts, uncached: number, cached: number, outputTokens = 0): number {
  return c.fixedMs + c.msPerUncached * uncached + c.msPerCached * cached + c.msPerOutput * outputTokens;
}

/** Solves the symmetric 3 × 3 system a·x = b by Gaussian elimination; undefined when singular. */
function solve3(a: Float64Array, b: Float64Array): number[] | undefined {
  const m = [0, 1, 2].map((i) => [
    a[i * 3] as number,
    a[i * 3 + 1] as number,
    a[i * 3 + 2] as number,
    b[i] as number,
  ]);
  for (let col = 0; col < 3; col++) {
    let piv = col;
    for (let r = col + 1; r < 3; r++) if (Math.abs(m[r]![col]!) > Math.abs(m[piv]![col]!)) piv = r;
    if (!(Math.abs(m[piv]![col]!) > 1e-12 * (Math.abs(a[0] as number) + 1))) return undefined;
    [m[col], m[piv]] = [m[piv]!, m[col]!];
    for (let r = 0; r < 3; r++) {
      if (r === col) continue;
      const f = m[r]![col]! / m[col]![col]!;
      for (let k = col; k < 4; k++) m[r]![k] = m[r]![k]! - f * m[col]![k]!;
    }
  }
  return [0, 1, 2].map((i) => m[i]![3]! / m[i]![i]!);
}

/** The least-squares fit with the slopes flagged in `zero` (uncached, cached) held at 0. */
function solvePinned(a: Float64Array, b: Float64Array, zero: boolean[]): number[] | undefined {
  const free = [0, ...[1, 2].filter((i) => !zero[i - 1])];
  const n = free.length;
  const m = free.map((i) => [...free.map((j) => a[i * 3 + j] as number), b[i] as number]);
  // n ≤ 3: tiny elimination.
  for (let col = 0; col < n; col++) {
    const d = m[col]![col]!;
    if (!(Math.abs(d) > 1e-12)) return undefined;
    for (let r = 0; r < n; r++) {
      if (r === col) continue;
      const f = m[r]![col]! / d;
      for (let k = col; k <= n; k++) m[r]![k] = m[r]![k]! - f * m[col]![k]!;
    }
  }
  const out = [0, 0, 0];
  free.forEach((i, r) => {
    out[i] = m[r]![n]! / m[r]![r]!;
  });
  return out;
}

/**
 * Puts our costs on every snapshot of ours among `out` (`advertiseCosts`): the full mesh's snapshot
 * messages, and gossip "scuttlebutt"'s states of our own tree (`self`), whose header relays carry on
 * unchanged, so every member learns our speed, not only those we talk to. Snapshots are shared
 * between the round's messages, so each distinct one is copied once with the field added (never
 * mutated); relayed owners' states keep the costs their owner stamped.
 */
export function stampCosts(out: Effect[], costs: EngineCosts, self?: string): void {
  const copies = new Map<Snapshot, Snapshot>();
  const stamp = (s: Snapshot): Snapshot => {
    let c = copies.get(s);
    if (c === undefined) {
      c = { ...s, header: { ...s.header, costs } };
      copies.set(s, c);
    }
    return c;
  };
  for (const e of out) {
    if (e.type === "send" && e.msg.type === "snapshot") e.msg = { ...e.msg, snapshot: stamp(e.msg.snapshot) };
    if (e.type !== "mesh-send" || e.msg.channel !== "gossip" || e.msg.msg.type !== "states") continue;
    const g = e.msg.msg;
    if (!g.states.some((x) => x.snapshot.header.sender === self)) continue;
    const states = g.states.map((x) =>
      x.snapshot.header.sender === self ? { ...x, snapshot: stamp(x.snapshot) } : x,
    );
    e.msg = { channel: "gossip", msg: { ...g, states } };
  }
}

/** Whether a peer's advertised costs are sane enough to compare against ours. */
export function usableCosts(c: EngineCosts | undefined): c is EngineCosts {
  return c !== undefined && c.fixedMs + c.msPerUncached > 0;
}
