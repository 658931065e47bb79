/** The node's `reply` effect carried out: the client answered (or failed) and the hit counters fed. */
import type { Effect } from "../../core/node/types.js";
import type { NodeMetrics } from "../metrics.js";
import { type ClientStreams, serviceErrorOf } from "./client-streams.js";
import type { RuntimeLogger } from "./logger.js";

export function replyToClient(
  clients: ClientStreams,
  o: { metrics: NodeMetrics; logger: RuntimeLogger },
  nodeId: string,
  { reqId, outcome, record }: Extract<Effect, { type: "reply" }>,
): void {
  const m = o.metrics;
  m.predictedCached.inc(record.predictedHitTokens);
  if (outcome.ok) {
    m.actualCached.inc(outcome.result.cachedTokens);
    const answered = clients.answer(reqId, {
      reqId,
      result: outcome.result,
      servedBy: record.servedBy ?? nodeId,
      hops: record.hops,
      timing: record, // its queueMs … totalMs are the breakdown
      fallbacks: record.fallbacks,
    });
    if (!answered) return;
  } else {
    clients.fail(reqId, serviceErrorOf(outcome));
  }
  o.logger.debug({ record }, "request done");
}
