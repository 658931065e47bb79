/** The node's `reply` effect carried out: the client answered (or failed) and the hit counters fed. */
import type { Engine } from "../../core/engine.js";
import type { Effect } from "../../core/node/types.js";
import type { NodeMetrics } from "../metrics.js";
import { namespaceRefusal } from "./client-admission.js";
import { type ClientStreams, serviceErrorOf } from "./client-streams.js";
import type { RuntimeLogger } from "./logger.js";

export function replyToClient(
  clients: ClientStreams,
  o: { metrics: NodeMetrics; logger: RuntimeLogger; engine: Engine },
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
    // A run refused by an engine that learnt only at that run (its server down at start) that it cannot
    // keep the request's namespace apart: told in the words and code admission tells every later one.
    const request = outcome.code === "invalid" ? clients.requestOf(reqId) : undefined;
    const refused = request && namespaceRefusal(o.engine, request);
    clients.fail(
      reqId,
      refused && outcome.error.endsWith(refused.message) ? refused : serviceErrorOf(outcome),
    );
  }
  o.logger.debug({ record }, "request done");
}
