/**
 * The serving node's line for a forward it answered: the entry node's request id (`traceId`, carried
 * on the forward) beside the origin's own ids, so `grep <x-request-id>` over every node's log finds
 * both ends of one request.
 */
import type { ReplyMsg } from "../../net/transport-wire.js";
import type { RuntimeLogger } from "../runtime/logger.js";
import type { AnsweredForward } from "../runtime/served-forwards.js";

const round3 = (x: number) => Math.round(x * 1000) / 1000;

export function logServedForward(
  logger: RuntimeLogger,
  f: AnsweredForward,
  reply: ReplyMsg,
  now: number,
): void {
  const base = {
    requestId: f.request.traceId,
    from: f.from,
    reqId: f.reqId,
    attempt: f.attempt,
    durationMs: round3(Math.max(0, now - f.receivedAt)),
  };
  if (reply.type === "result") {
    logger.info(
      {
        ...base,
        cachedTokens: reply.result.cachedTokens,
        promptTokens: reply.result.promptTokens,
        completionTokens: reply.result.completionTokens,
      },
      "forward served",
    );
  } else {
    logger.info({ ...base, error: reply.error, retryable: reply.retryable }, "forward not served");
  }
}
