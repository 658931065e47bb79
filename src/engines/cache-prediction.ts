/**
 * Predicted vs reported cached tokens, per remote engine: before a run the engine's cache model says
 * how many prompt tokens the server will find cached; the server's report after it says how many it
 * did. The tally (every run, calibration's too) is what `/cluster` shows; each served run's outcome is
 * counted in `prefixmesh_engine_cache_predictions_total` (src/server/runtime/cache-predictions.ts).
 */

/** Which cache model made the prediction. */
export type CacheModelSource = "llama-slots" | "kv-events" | "lru";

/** One run's prediction and the server's report (undefined: none made / none reported). */
export interface CachePrediction {
  source: CacheModelSource;
  predicted: number | undefined;
  reported: number | undefined;
}

/** exact: predicted = reported; wrong: both known and different; unpredicted / unreported: one missing. */
export type PredictionOutcome = "exact" | "wrong" | "unpredicted" | "unreported";

export function predictionOutcome(p: CachePrediction): PredictionOutcome {
  if (p.reported === undefined) return "unreported";
  if (p.predicted === undefined) return "unpredicted";
  return p.predicted === p.reported ? "exact" : "wrong";
}

export interface PredictionAccuracy {
  source: CacheModelSource;
  /** Runs with both a prediction and a report. */
  requests: number;
  /** Of those, predicted = reported. */
  exact: number;
  /** exact / requests (null before the first). */
  exactShare: number | null;
  predictedTokens: number;
  reportedTokens: number;
  /** Σ |predicted − reported|. */
  absErrorTokens: number;
  unpredicted: number;
  unreported: number;
}

export class PredictionTally {
  private requests = 0;
  private exact = 0;
  private predictedTokens = 0;
  private reportedTokens = 0;
  private absErrorTokens = 0;
  private unpredicted = 0;
  private unreported = 0;

  constructor(private readonly source: CacheModelSource) {}

  /** Counts one run; returns what the result should carry. */
  observe(predicted: number | undefined, reported: number | undefined): CachePrediction {
    const p: CachePrediction = { source: this.source, predicted, reported };
    switch (predictionOutcome(p)) {
      case "unreported":
        this.unreported++;
        break;
      case "unpredicted":
        this.unpredicted++;
        break;
      default:
        this.requests++;
        if (predicted === reported) this.exact++;
        this.predictedTokens += predicted!;
        this.reportedTokens += reported!;
        this.absErrorTokens += Math.abs(predicted! - reported!);
    }
    return p;
  }

  snapshot(): PredictionAccuracy {
    return {
      source: this.source,
      requests: this.requests,
      exact: this.exact,
      exactShare: this.requests > 0 ? this.exact / this.requests : null,
      predictedTokens: this.predictedTokens,
      reportedTokens: this.reportedTokens,
      absErrorTokens: this.absErrorTokens,
      unpredicted: this.unpredicted,
      unreported: this.unreported,
    };
  }
}
