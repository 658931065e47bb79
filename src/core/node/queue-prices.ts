/**
 * Queue-aware waits (executor/job-queue.ts, with `maxWaitMs`) are the sum of the waiting jobs' priced runs,
 * each priced when it joined the queue: a prompt whose prefix a job ahead of it will cache is priced
 * as a hit. When that job leaves the queue without running (offload moves it, its origin cancels it,
 * it expires), the hit is gone: a job behind it still priced as a hit runs cold, and every request
 * admitted behind it on the stale sum then waits past its bound. So a job leaving the queue gets the
 * jobs behind it that may have counted on its prefix priced again.
 *
 * This never makes a job already waiting wait longer than it was told: the removed job's own price
 * held the prefill of every token it would have added to the cache, and that is the most the jobs
 * behind it can now have to prefill again (they share a prefix tree: the first to run caches it for
 * the rest). It covers removals only: a job that runs without caching its prompt, or an eviction
 * before a job starts, still leaves the jobs behind it priced as hits.
 */
import type { EngineRequest, Tokens } from "../engine.js";
import { keyTokens } from "../namespace.js";

/** A queued job as pricing sees it. */
export interface PricedJob {
  request: EngineRequest;
  cancelled: boolean;
  /** Its expected run (ms), as last priced. */
  workMs: number;
  /** The prefix (cache key tokens) its price counted as cached when it runs. */
  pricedMatch: number;
}

/** Tokens `a` and `b` share from the start. */
export function sharedPrefix(a: Tokens, b: Tokens): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

/**
 * Prices again the jobs of `queue[from..)` behind `removed` (all of them when `removed` has left the
 * array already) whose priced hit it may have supplied; `price(job, i)` sets the job's new price.
 * Returns the change of the queue's summed work (ms).
 *
 * One pass, O(queue × prompt): `covered` is the longest prefix of `removed`'s key that a job still
 * waiting between it and the current one shares, and that job caches it before the current one
 * starts; a job priced on no more than that lost nothing (two keys sharing p tokens with `removed`
 * share them with each other). Without it a queue sharing one system prompt was priced again whole,
 * each job by a scan of the queue ahead of it: quadratic on the event loop, for any cancel or expiry.
 */
export function repriceBehind<J extends PricedJob>(
  queue: readonly J[],
  from: number,
  removed: J,
  price: (job: J, index: number) => void,
  caches: (job: J) => boolean = () => true,
): number {
  const key = keyTokens(removed.request);
  let behind = !queue.includes(removed, from);
  let covered = 0;
  let delta = 0;
  for (let i = from; i < queue.length; i++) {
    const job = queue[i] as J;
    if (job === removed) {
      behind = true;
      continue;
    }
    if (!behind || job.cancelled) continue;
    const shared = sharedPrefix(key, keyTokens(job.request));
    // Only a job sharing more of `removed` than a job between them supplies may have counted on it.
    if (job.pricedMatch > covered && shared >= job.pricedMatch) {
      const before = job.workMs;
      price(job, i);
      delta += job.workMs - before;
    }
    if (caches(job)) covered = Math.max(covered, shared);
  }
  return delta;
}
