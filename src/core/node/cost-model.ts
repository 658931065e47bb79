/**
 * The costs a node learns online from its OWN engine results, for cost-aware routing: no hand-typed
 * constants beyond the priors in the config, which only matter until real samples outweigh them.
 *
 * Prefill: a decayed weighted least-squares line `prefillMs ≈ fixedMs + msPerToken × uncached`. Every
 * sample's weight is multiplied by `decay` when a new one arrives, so the fit follows a changing
 * machine (load, thermal, another model) with an effective memory of 1 / (1 − decay) samples. The
 * prior enters as two pseudo-observations (total weight `weight`, at 0 and `PRIOR_SPAN` tokens) that
 * decay like real samples, so after a few hundred runs only the data speaks (a prior that never
 * decays would dominate the slope whenever recent samples bunch up, e.g. all cache hits); a tiny
 * non-decaying floor of the same line keeps the fit defined when every sample has one length.
 *
 * Pure and deterministic: samples in, numbers out.
 */

import type { EngineCosts } from "../snapshot.js";

export interface CostPrior {
  /** Fixed cost per request (scheduling, tokenization, overhead), ms. */
  prefillFixedMs: number;
  /** Prefill cost per uncached prompt token, ms. */
  prefillMsPerToken: number;
  /** Weight of the prior in samples (it decays like real samples). */
  weight: number;
  /** RTT assumed for a peer until one is measured, ms. */
  rttMs: number;
}

/** What a policy may use: the node's current belief about its costs. */
export interface LearnedCosts {
  /** Intercept of the prefill fit, ms. */
  prefillFixedMs: number;
  /** Slope of the prefill fit, ms per uncached token (never negative). */
  prefillMsPerToken: number;
  /** Expected engine time of one queued request (service-time EWMA), ms. */
  serviceMs: number;
  /** RTT to assume for a peer not measured yet, ms. */
  rttPriorMs: number;
  /** Engine samples behind the fit. */
  samples: number;
  /**
   * With `advertiseCosts`, once measured: our whole engine cost model (engine-costs.ts), which peers'
   * advertised costs are compared with (same model form on both sides).
   */
  engine?: EngineCosts;
  /** Decode time per output token measured on our runs (engine-costs.ts), ms; absent before any. */
  msPerOutput?: number;
}

/**
 * How long a run takes by our learned costs: the prefill of `uncached` prompt tokens, then its whole
 * `maxTokens` budget of decode at `msPerOutput` per token (an upper estimate: it may stop sooner).
 * The one run-length estimate of an origin: its forward timeout and its answer estimates use it.
 */
export function expectedRunMs(
  k: LearnedCosts,
  uncached: number,
  maxTokens: number,
  msPerOutput: number,
): number {
  return k.prefillFixedMs + k.prefillMsPerToken * uncached + Math.max(0, maxTokens) * msPerOutput;
}

/** Where the second prior pseudo-observation sits (a typical prompt length). */
const PRIOR_SPAN = 1000;
/** Weight of the non-decaying prior floor, in samples. */
const FLOOR_WEIGHT = 1e-3;

export class PrefillFit {
  private sw = 0;
  private sx = 0;
  private sy = 0;
  private sxx = 0;
  private sxy = 0;
  private n = 0;

  constructor(
    private readonly prior: CostPrior,
    private readonly decay: number,
  ) {
    const w = prior.weight / 2;
    this.add(0, prior.prefillFixedMs, w);
    this.add(PRIOR_SPAN, prior.prefillFixedMs + prior.prefillMsPerToken * PRIOR_SPAN, w);
  }

  private add(x: number, y: number, w: number): void {
    this.sw += w;
    this.sx += w * x;
    this.sy += w * y;
    this.sxx += w * x * x;
    this.sxy += w * x * y;
  }

  /** Calibration measured this machine: the prior goes (only before any sample; the floor stays). */
  dropPrior(): void {
    if (this.n > 0) return;
    this.sw = this.sx = this.sy = this.sxx = this.sxy = 0;
  }

  /** One engine result: `uncached` prompt tokens took `prefillMs`. Non-finite or negative: ignored. */
  sample(uncached: number, prefillMs: number): void {
    if (!(uncached >= 0) || !(prefillMs >= 0) || !Number.isFinite(uncached) || !Number.isFinite(prefillMs))
      return;
    const d = this.decay;
    this.sw *= d;
    this.sx *= d;
    this.sy *= d;
    this.sxx *= d;
    this.sxy *= d;
    this.add(uncached, prefillMs, 1);
    this.n++;
  }

  get samples(): number {
    return this.n;
  }

  /** Current (fixed, slope) with the prior's pseudo-observations added. */
  fit(): { fixedMs: number; msPerToken: number } {
    const p = this.prior;
    const w = FLOOR_WEIGHT / 2;
    const y1 = p.prefillFixedMs + p.prefillMsPerToken * PRIOR_SPAN;
    const sw = this.sw + 2 * w;
    const sx = this.sx + w * PRIOR_SPAN;
    const sy = this.sy + w * (p.prefillFixedMs + y1);
    const sxx = this.sxx + w * PRIOR_SPAN * PRIOR_SPAN;
    const sxy = this.sxy + w * PRIOR_SPAN * y1;
    const det = sw * sxx - sx * sx;
    if (!(det > 1e-9 * sw * sxx) || !(sw > 0)) {
      return { fixedMs: p.prefillFixedMs, msPerToken: p.prefillMsPerToken };
    }
    let slope = (sw * sxy - sx * sy) / det;
    // More uncached tokens never make prefill cheaper: a negative slope is noise.
    if (!(slope >= 0)) slope = 0;
    const fixed = Math.max(0, (sy - slope * sx) / sw);
    return { fixedMs: fixed, msPerToken: slope };
  }

  /** Expected prefill of `uncached` tokens, ms. */
  predict(uncached: number): number {
    const f = this.fit();
    return f.fixedMs + f.msPerToken * Math.max(0, uncached);
  }
}
