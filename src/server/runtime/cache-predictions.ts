/**
 * Remote engines' cache predictions (src/engines/cache-prediction.ts) as the node shows them: each
 * run's outcome counted in `prefixmesh_engine_cache_predictions_total{outcome,source}`, and the
 * engine's running accuracy in `/cluster` (`engineCache`).
 */
import type { Engine, EngineResult } from "../../core/engine.js";
import { type CachePrediction, predictionOutcome } from "../../engines/cache-prediction.js";
import type { KvEventsStatus } from "../../engines/kv-events/cache-model.js";
import type { RemoteCacheStatus } from "../../engines/openai/engine.js";
import type { KvEventsGaugeView, NodeMetrics } from "../metrics.js";

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

/** The KV-event mirror's status, for engines that follow KV events (without the rest of cacheStatus). */
export function engineKvEventsStatus(engine: Engine): KvEventsStatus | undefined {
  const e = engine as Engine & { kvEventsStatus?: () => KvEventsStatus | undefined };
  return typeof e.kvEventsStatus === "function" ? e.kvEventsStatus() : undefined;
}

/** What the metrics show of it (`prefixmesh_engine_kv_*`). */
export function kvEventsGauges(k: KvEventsStatus): KvEventsGaugeView {
  const {
    state: _s,
    synced: _y,
    nextSequence: _n,
    lastBatchAt: _a,
    lastBatchTs: _t,
    queued: _q,
    lastError: _e,
    ...subscriber
  } = k.subscriber;
  return {
    exact: k.exact,
    blocks: k.mirror.blocks,
    reachableBlocks: k.mirror.reachableBlocks,
    subscriber: { ...subscriber },
    mirror: { ...k.mirror.counters },
  };
}
