/** Forward fixtures shared by the transport tests (HTTP per forward, and the forward channel). */
import type { ForwardMsg, ReplyMsg } from "../../src/net/transport-wire.js";

export const SECRET = Buffer.alloc(32, 7);

/** A forward of four tokens, one of them above 2^31 (tokens travel as unsigned 32-bit). */
export const fwd = (reqId: string, maxTokens = 2): ForwardMsg => ({
  type: "forward",
  reqId,
  attempt: 0,
  hops: 1,
  request: { id: reqId, tokens: Uint32Array.from([1, 2, 3, 4_000_000_000]), prompt: "abcd", maxTokens },
});

/** The result a fake serving node `servedBy` gives `msg`: `text`, one token per character. */
export const resultFor = (msg: ForwardMsg, text: string, servedBy = "B"): ReplyMsg => ({
  type: "result",
  reqId: msg.reqId,
  attempt: msg.attempt,
  result: {
    text,
    completionTokens: text.length,
    promptTokens: msg.request.tokens.length,
    cachedTokens: 0,
    prefillMs: 0,
    decodeMs: 0,
    finishReason: "stop",
  },
  timing: { servedBy, queueMs: 0, prefillMs: 0, decodeMs: 0 },
});
