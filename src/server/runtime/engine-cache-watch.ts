/**
 * Engine-managed caches that change between runs (a vLLM or SGLang server's KV events): each change
 * becomes an `engine-cache-changed` input, so the node's tree (and the next snapshot peers get)
 * follows the server's cache as events arrive, not at the node's next run. Bursts are coalesced: at
 * most one input per `coalesceMs`, carrying the cache as it is then.
 */
import type { Engine } from "../../core/engine.js";
import type { NodeInput } from "../../core/node/types.js";

export function watchEngineCache(
  engine: Engine,
  feed: (input: NodeInput) => void,
  coalesceMs = 10,
): () => void {
  if (!engine.watchCache || !engine.cachedSequences || engine.info.cacheMode !== "engine-managed")
    return () => {};
  let timer: NodeJS.Timeout | undefined;
  const unwatch = engine.watchCache(() => {
    if (timer !== undefined) return;
    timer = setTimeout(() => {
      timer = undefined;
      feed({ type: "engine-cache-changed", sequences: engine.cachedSequences!() });
    }, coalesceMs);
    timer.unref?.();
  });
  return () => {
    unwatch();
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
  };
}
