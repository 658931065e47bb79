/**
 * A forward's fields on the wire, both ways (transport-wire.ts has the table): the body of POST
 * /peer/forward (tokens base64 in the JSON) and the fields the channel's frame carries
 * (forward-frame.ts), validated by wire-schemas.ts first; and the ack a carrier's own answer stands for.
 */
import type { z } from "zod";
import type { EngineRequest } from "../core/engine.js";
import { parseCount } from "./snapshot-wire.js";
import type { Decoded, ForwardAckMsg, ForwardMsg } from "./transport-wire.js";
import { type forwardMetaSchema, forwardWireSchema } from "./wire-schemas.js";

/**
 * Tokens travel as base64 of little-endian uint32: smaller than a JSON array of numbers, and decoded
 * natively rather than parsed number by number (BENCHMARKS.md, "Forward frame sizes").
 */
function encodeTokens(t: Uint32Array): string {
  const le = new Uint32Array(t); // copy: own buffer, aligned
  return Buffer.from(le.buffer, le.byteOffset, le.byteLength).toString("base64");
}

function decodeTokens(b64: string): Uint32Array {
  const buf = Buffer.from(b64, "base64");
  if (buf.length % 4 !== 0) throw new Error("token bytes not a multiple of 4");
  const out = new Uint32Array(buf.length / 4);
  Buffer.from(out.buffer).set(buf);
  return out;
}

/**
 * An engine request's fields but its tokens, written out: this runs once per forward at each end, and
 * spreads are several times slower here. Undefined fields drop out of JSON.
 */
function requestFields(
  r: Omit<EngineRequest, "tokens">,
  withPrompt = true,
  /** The tokens already encoded for JSON (base64), when they travel in it. */
  tokens?: string,
): Omit<EngineRequest, "tokens"> & { tokens?: string } {
  return {
    id: r.id,
    tokens,
    prompt: withPrompt ? r.prompt : undefined,
    maxTokens: r.maxTokens,
    temperature: r.temperature,
    topP: r.topP,
    seed: r.seed,
    presencePenalty: r.presencePenalty,
    frequencyPenalty: r.frequencyPenalty,
    stop: r.stop,
    cacheSalt: r.cacheSalt,
    adapter: r.adapter,
    model: r.model,
    tokenizer: r.tokenizer,
    messages: r.messages,
    traceId: r.traceId,
  };
}

/** A forward's wire fields, without its tokens (which travel base64 in JSON, or as raw bytes). */
export function forwardFields(m: ForwardMsg, withPrompt: boolean, tokens?: string) {
  return {
    reqId: m.reqId,
    attempt: m.attempt,
    hops: m.hops,
    deadlineMs: m.deadlineMs,
    waitMs: m.waitMs,
    request: requestFields(m.request, withPrompt, tokens),
  };
}

/** The body of POST /peer/forward. */
export function forwardToWire(m: ForwardMsg, withPrompt = true) {
  return forwardFields(m, withPrompt, encodeTokens(m.request.tokens));
}

export function forwardFromWire(w: z.infer<typeof forwardWireSchema>): ForwardMsg {
  // forwardMsg copies the request's fields but its tokens: the wire's base64 is left behind.
  return forwardMsg(w, decodeTokens(w.request.tokens));
}

/** The ForwardMsg for validated wire fields and their decoded tokens (both forward encodings). */
export function forwardMsg(f: z.infer<typeof forwardMetaSchema>, tokens: Uint32Array): ForwardMsg {
  // requestFields' `tokens` slot (undefined here) takes the decoded tokens.
  const request = requestFields(f.request) as Omit<EngineRequest, "tokens"> & { tokens: unknown };
  request.tokens = tokens;
  const msg: ForwardMsg = {
    type: "forward",
    reqId: f.reqId,
    attempt: f.attempt,
    hops: f.hops,
    request: request as EngineRequest,
  };
  if (f.deadlineMs !== undefined) msg.deadlineMs = f.deadlineMs;
  if (f.waitMs !== undefined) msg.waitMs = f.waitMs;
  return msg;
}

/** A forward as it came off the wire (parsed JSON), validated and decoded; or why it was refused. */
export function parseForward(json: unknown): Decoded<ForwardMsg> {
  const parsed = forwardWireSchema.safeParse(json);
  if (!parsed.success) return { ok: false, error: `bad forward: ${parsed.error.issues[0]?.message}` };
  try {
    return { ok: true, msg: forwardFromWire(parsed.data) };
  } catch (err) {
    return { ok: false, error: `bad forward: ${(err as Error).message}` };
  }
}

/**
 * The `forward-ack` a carrier's own ack stands for (the forward's HTTP response headers, or the
 * channel's `ack` record or first chunk): it carries no ETA, and the peer's epoch when its ack said one.
 */
export function carrierAck(f: ForwardMsg, epoch?: number): ForwardAckMsg {
  const ack: ForwardAckMsg = { type: "forward-ack", reqId: f.reqId, attempt: f.attempt };
  if (epoch !== undefined) ack.epoch = epoch;
  return ack;
}

/**
 * The acking node's epoch on a forward's 200 (its node's `forward-ack`: core types.ts). A response
 * header, so the shared-secret signature (requests only) does not cover it: like the answer on the
 * same stream, it is as trusted as the connection (mutual TLS is the real mode).
 */
export const EPOCH_HEADER = "x-prefixmesh-epoch";

/** The forward response's epoch header, or undefined if absent or invalid (an older peer). */
export function parseEpoch(
  headers: Readonly<Record<string, string | string[] | undefined>>,
): number | undefined {
  return parseCount(headers[EPOCH_HEADER]);
}
