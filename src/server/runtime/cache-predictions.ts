/**
 * Remote engines' cache predictions (src/engines/cache-prediction.ts) as the node shows them: each
 * run's outcome counted in `prefixmesh_engine_cache_predictions_total{outcome,source}`, and the
 * engine's running accuracy in `/cluster` (`engineCache`).
 */
import type { Engine, EngineResult } from "../../core/engine.js";
import { type CachePrediction, predictionOutcome } from "../../engines/cache-prediction.js";
import type { RemoteCacheStatus } from "../../engines/openai/engine.js";
import type { NodeMetrics } from "../metrics.js";

/** Counts the prediction a remote engine's result carries, and takes it off the result. */
export function countPrediction(metrics: NodeMetrics, result: EngineResult): void {
  const r = result as EngineResult & { cachePrediction?: CachePrediction };
  const p = r.cachePrediction;
  if (p === undefined) return;
  delete r.cachePrediction;
  metrics.enginePredictions.inc({ outcome: predictionOutcome(p), source: p.source });
}

/** The engine's cache model and its accuracy, for engines that predict (remote ones). */
export function engineCacheStatus(engine: Engine): RemoteCacheStatus | undefined {
  const e = engine as Engine & { cacheStatus?: () => RemoteCacheStatus };
  return typeof e.cacheStatus === "function" ? e.cacheStatus() : undefined;
}
