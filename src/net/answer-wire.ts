/**
 * An answer's records on the wire (transport-wire.ts has the table): a reply stripped of engine-local
 * fields, and the answer stream's records over HTTP (NDJSON lines) and on the channel.
 */
import type { EngineResult } from "../core/engine.js";
import type { ReplyMsg } from "./transport-wire.js";

/** Strips engine-local fields (cachedSequences) from a reply before it crosses the network. */
export function replyToWire(m: ReplyMsg): ReplyMsg {
  if (m.type === "error") return m;
  const r: EngineResult = m.result;
  return {
    type: m.type,
    reqId: m.reqId,
    attempt: m.attempt,
    timing: m.timing,
    result: {
      text: r.text,
      completionTokens: r.completionTokens,
      promptTokens: r.promptTokens,
      cachedTokens: r.cachedTokens,
      prefillMs: r.prefillMs,
      decodeMs: r.decodeMs,
      finishReason: r.finishReason,
    },
    // freshPeerLoad (core peer-load.ts): the server's queue depth as the answer left.
    ...(m.queueDepth === undefined ? {} : { queueDepth: m.queueDepth }),
  };
}

/** The answer stream's records over HTTP: one NDJSON line each. */
export const streamLine = {
  chunk: (text: string) => `${JSON.stringify({ t: "chunk", text })}\n`,
  final: (m: ReplyMsg) => `${JSON.stringify({ t: "msg", msg: replyToWire(m) })}\n`,
};

/** The records of answer stream k on the channel. */
export const answerRecord = {
  ack: (k: number, epoch?: number) => (epoch === undefined ? { t: "ack", k } : { t: "ack", k, e: epoch }),
  chunk: (k: number, text: string) => ({ t: "chunk", k, text }),
  final: (k: number, m: ReplyMsg) => ({ t: "msg", k, msg: replyToWire(m) }),
  /** The forward in frame k was refused before any node saw it (a malformed forward). */
  rej: (k: number, error: string) => ({ t: "rej", k, error }),
};
