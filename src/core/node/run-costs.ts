/**
 * What the executor learns from its own engine runs: the prefill fit, the whole engine cost model
 * (what we advertise) and the mean service time. Kept apart from executor.ts so the queue and the
 * cache mirror stay one job and the learning another; the executor feeds it each finished run.
 */
import type { EngineResult } from "../engine.js";
import type { EngineCosts } from "../snapshot.js";
import type { NodeConfig } from "./config.js";
import { type LearnedCosts, PrefillFit } from "./cost-model.js";
import { type CostSample, EngineCostFit, predictRunMs } from "./engine-costs.js";

export class RunCosts {
  private serviceMsEwma: number | undefined;
  private readonly prefillFit: PrefillFit;
  /** The whole engine cost model (engine-costs.ts): what we advertise and compare peers by. */
  private readonly engineFit: EngineCostFit;

  constructor(private readonly config: NodeConfig) {
    this.prefillFit = new PrefillFit(config.costPrior, config.costDecay);
    this.engineFit = new EngineCostFit(config.costPrior, config.costDecay);
  }

  /** The measured service time of a run here (a 1/8 moving average); undefined until a run is timed. */
  get serviceMs(): number | undefined {
    return this.serviceMsEwma;
  }

  /** A run of a `promptTokens` prompt finished after `serviceMs`: both fits and the mean learn it. */
  sample(promptTokens: number, result: EngineResult, serviceMs: number): void {
    this.prefillFit.sample(promptTokens - result.cachedTokens, result.prefillMs);
    this.engineFit.sample(costSample(promptTokens, result));
    this.serviceMsEwma =
      this.serviceMsEwma === undefined
        ? serviceMs
        : this.serviceMsEwma + (serviceMs - this.serviceMsEwma) / 8;
  }

  /**
   * Expected service time of a run with `uncached` and `cached` prompt tokens and up to `outputTokens`
   * to generate (the whole run: a long answer is mostly decode), at least the measured mean.
   */
  serviceFor(uncached: number, cached: number, outputTokens: number): number {
    return Math.max(this.runFor(uncached, cached, outputTokens), this.serviceMsEwma ?? 0);
  }

  /**
   * Expected run of a prompt with `uncached` and `cached` tokens and `outputTokens` to generate:
   * the engine cost model once measured, else the prefill fit plus the measured decode per token.
   */
  runFor(uncached: number, cached: number, outputTokens: number): number {
    const c = this.engineCosts();
    if (c !== undefined) return Math.max(0, predictRunMs(c, uncached, cached, outputTokens));
    return this.prefillFit.predict(uncached) + (this.engineFit.msPerOutput ?? 0) * outputTokens;
  }

  /**
   * Start-up calibration (the daemon's, before it is ready): runs made outside any job, taken by
   * both fits as if they were our own runs; they replace the configured prior (a guess).
   */
  calibrate(samples: readonly CostSample[]): void {
    if (samples.length === 0) return;
    this.prefillFit.dropPrior();
    this.engineFit.dropPrior();
    for (const s of samples) {
      this.prefillFit.sample(s.uncached, s.prefillMs);
      this.engineFit.sample(s);
    }
  }

  /** Our engine's cost model, once calibration or enough runs measured it; undefined before. */
  engineCosts(): EngineCosts | undefined {
    return this.engineFit.measured ? this.engineFit.costs() : undefined;
  }

  /** The costs learned from our own runs (what cost-aware routing sees). */
  learned(): LearnedCosts {
    const f = this.prefillFit.fit();
    const engine = this.config.advertiseCosts ? this.engineCosts() : undefined;
    const msPerOutput = this.engineFit.msPerOutput;
    return {
      ...(engine === undefined ? {} : { engine }),
      ...(msPerOutput === undefined ? {} : { msPerOutput }),
      prefillFixedMs: f.fixedMs,
      prefillMsPerToken: f.msPerToken,
      // Until a run is timed, the service time of an uncached prompt of typical length.
      serviceMs: this.serviceMsEwma ?? f.fixedMs + f.msPerToken * 1000,
      rttPriorMs: this.config.costPrior.rttMs,
      samples: this.prefillFit.samples,
    };
  }
}

/** A finished run as the engine cost fit sees it. */
function costSample(promptTokens: number, r: EngineResult): CostSample {
  return {
    uncached: promptTokens - r.cachedTokens,
    cached: r.cachedTokens,
    prefillMs: r.prefillMs,
    outputTokens: r.completionTokens,
    decodeMs: r.decodeMs,
  };
}
