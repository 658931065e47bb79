/** Forward fixtures shared by the transport tests (HTTP per forward, and the forward channel). */
import { BLOCK_SIZE } from "../../src/core/block-hash.js";
import type { PeerAuth } from "../../src/net/transport-auth.js";
import type { ForwardMsg, ReplyMsg, SnapshotMsg } from "../../src/net/transport-wire.js";

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

/** A full snapshot from `sender` holding `keys` (block keys), with `extra` message fields. */
export const snapshotMsg = (
  keys: number[],
  extra: Omit<SnapshotMsg, "type" | "snapshot"> = {},
  sender = "A",
): SnapshotMsg => ({
  type: "snapshot",
  snapshot: {
    kind: "full",
    header: {
      sender,
      epoch: 1,
      version: 1,
      tokenCount: keys.length * BLOCK_SIZE,
      capacity: 1024,
      queueDepth: 0,
      pushBackMs: 0,
    },
    body: { blockSize: BLOCK_SIZE, keys: Float64Array.from(keys) },
  },
  ...extra,
});

/**
 * Headers signing a raw body to `path` for node `to` as `auth`'s node, with `extra` headers (signed
 * too when they are x-prefixmesh-*): what PeerClient sends beside it.
 */
export const signed = (
  auth: PeerAuth,
  path: string,
  body: Uint8Array,
  contentType: string,
  extra: Record<string, string> = {},
  to = "B",
) => auth.sign({ method: "POST", path, body, to, headers: { "content-type": contentType, ...extra } });
