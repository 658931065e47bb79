/**
 * The wire form of every `PeerMessage` (src/core/node/peer-messages.ts), both ways: the one place that maps
 * the core's messages to bodies, headers and records and back. The carriers (transport-client.ts and
 * transport-server.ts over HTTP, channel-client.ts and channel-server.ts over the forward channel) move
 * what this module makes and hand back what it decodes; they never build or read a message's fields.
 * Everything a peer sends is validated first (wire-schemas.ts; the core codec for snapshots).
 *
 *   kind            HTTP                                          forward channel
 *   snapshot        POST /peer/snapshot: the core codec's bytes;  —
 *                   holds, blocks, at, echo, served as
 *                   x-prefixmesh-* headers (snapshotHeaders)
 *   forward         POST /peer/forward: JSON, tokens base64       binary frame (encodeForwardFrame)
 *   forward-ack     the forward's 200 response headers, the       {"t":"ack","k":K,"e":epoch}
 *                   epoch as x-prefixmesh-epoch
 *   result, error   the forward's final NDJSON record; without    {"t":"msg","k":K,"msg":…}
 *                   an open stream, POST /peer/message (JSON)
 *   cancel, goodbye POST /peer/message (JSON)                     —
 *
 * Forward stream (response of POST /peer/forward), NDJSON, one record per line:
 *   {"t":"chunk","text":"…"}*  then exactly one  {"t":"msg","msg":<result|error message>}
 * A stream that ends without the final record was cut off and is an error, never a short answer.
 * Shared-secret mode (auth/response-mac.ts): every HTTP answer to a request the node authenticated is
 * bound to that request — `x-prefixmesh-response-mac` tags the status, every x-prefixmesh-* response
 * header (the epoch) and a body sent whole; each forward stream record is its tag (32 hex digits), a
 * space, then the record. An answer that fails is garbled, like a malformed one: an error, never taken
 * altered. A refusal of a request the node could not authenticate (401) cannot be sealed without
 * sealing for whoever sent it; it is marked `unauthenticated` and is no verdict on the peer at once.
 *
 * Forward channel (a WebSocket on the peer port, GET /peer/channel): many forwards multiplexed on one
 * connection, each named by a stream number `k` the origin picks. Origin → peer, a binary frame:
 *   {"t":"fwd","k":K,"f":<forward, as POST /peer/forward's body without tokens>} + raw tokens
 *   (see encodeForwardFrame)
 * Peer → origin: the forward stream's records with its `k`, or a refusal of a malformed forward,
 *   {"t":"ack","k":K,"e":epoch}?  {"t":"chunk","k":K,"text":"…"}*  then  {"t":"msg","k":K,"msg":…}
 *   | {"t":"rej","k":K,"error":"…"}
 * (`ack`: the peer accepted the forward; left out when a chunk or the answer leaves first. Its epoch,
 * the acking node's, is optional: older peers send none, and an implied ack carries none.)
 * as a JSON array per frame: the records one event-loop turn produced (typically a forward's last
 * chunk and its final message) leave in one frame and one write, waking the origin once.
 * A channel that closes with streams open has cut them off: an error for each, never a short answer.
 */
import type { IncomingHttpHeaders } from "node:http";
import type { z } from "zod";
import type { EngineRequest, EngineResult } from "../core/engine.js";
import type { HeldVersion, PeerMessage, SnapshotEcho } from "../core/node/types.js";
import type { Snapshot } from "../core/snapshot.js";
import { decodeSnapshot } from "../core/snapshot-codec.js";
import {
  channelCancelSchema,
  channelForwardHead,
  channelForwardSchema,
  type forwardMetaSchema,
  forwardWireSchema,
  MAX_PROMPT_TOKENS,
  messageWireSchema,
} from "./wire-schemas.js";

export type ForwardMsg = Extract<PeerMessage, { type: "forward" }>;
export type ForwardAckMsg = Extract<PeerMessage, { type: "forward-ack" }>;
export type ReplyMsg = Extract<PeerMessage, { type: "result" | "error" }>;
export type CancelMsg = Extract<PeerMessage, { type: "cancel" }>;
export type SnapshotMsg = Extract<PeerMessage, { type: "snapshot" }>;
/** The messages that travel on a request of their own (a forward streams its answer instead). */
export type LoneMessage = SnapshotMsg | ReplyMsg | CancelMsg | Extract<PeerMessage, { type: "goodbye" }>;

/**
 * 2: shared-secret signatures cover the destination node and every `x-prefixmesh-*` header (a v1
 * node's signatures fail a v2 node's check, and the other way round).
 * 3: shared-secret HTTP answers carry a response MAC (auth/response-mac.ts): a v2 node's answers fail
 * a v3 node's check, and a v3 node's hello is refused by a v2 node for its version.
 * The newest version this build speaks; protocol-range.ts has the oldest, and which peers it talks to.
 * Not every wire addition takes a number: a shared-secret channel's 101 answer gained a MAC
 * (auth/channel-mac.ts) within 3, announced by the hello's `channelAcceptMac` (protocol-range.ts says why).
 */
export const PROTOCOL_VERSION = 3;
export const HELLO_PATH = "/peer/hello";
export const SNAPSHOT_PATH = "/peer/snapshot";
export const MESSAGE_PATH = "/peer/message";
export const FORWARD_PATH = "/peer/forward";
export const CHANNEL_PATH = "/peer/channel";
/**
 * A peer's refusal of a forward that came without the prompt text while its engine needs it (it
 * restarted with another engine since its hello said otherwise): the origin sends the text from then
 * on and re-sends this forward at once.
 */
export { PROMPT_TEXT_NEEDED } from "../core/node/types.js";

// ---------------------------------------------------------------- messages on their own

/** A lone message as one HTTP request: where it goes, its body and its headers. */
export interface WireRequest {
  path: string;
  body: Uint8Array;
  headers: Record<string, string>;
}

/** `m` as its request; `snapshotBytes` gives a snapshot's codec bytes (the caller encodes each once). */
export function loneMessageToWire(m: LoneMessage, snapshotBytes: (s: Snapshot) => Uint8Array): WireRequest {
  if (m.type === "snapshot") {
    return { path: SNAPSHOT_PATH, body: snapshotBytes(m.snapshot), headers: snapshotHeaders(m) };
  }
  const wire = m.type === "result" || m.type === "error" ? replyToWire(m) : m;
  return {
    path: MESSAGE_PATH,
    body: Buffer.from(JSON.stringify(wire)),
    headers: { "content-type": "application/json" },
  };
}

export type Decoded<T> = { ok: true; msg: T } | { ok: false; error: string };

/** The body of POST /peer/message (parsed JSON) as its message, validated; or why it was refused. */
export function messageFromWire(json: unknown): Decoded<Exclude<LoneMessage, SnapshotMsg>> {
  const parsed = messageWireSchema.safeParse(json);
  if (!parsed.success) return { ok: false, error: `bad message: ${parsed.error.issues[0]?.message}` };
  return { ok: true, msg: parsed.data };
}

/**
 * The headers beside a snapshot's bytes: the ack, the sender's block count, the RTT clock and echo,
 * and how many requests the sender has served.
 */
export function snapshotHeaders(m: SnapshotMsg): Record<string, string> {
  const h = formatHolds(m.holds);
  const echo = formatEcho(m.echo);
  return {
    "content-type": "application/octet-stream",
    ...(h ? { "x-prefixmesh-holds": h } : {}),
    ...(m.blocks !== undefined ? { "x-prefixmesh-blocks": String(m.blocks) } : {}),
    ...(m.at !== undefined ? { "x-prefixmesh-at": formatClock(m.at) } : {}),
    ...(echo ? { "x-prefixmesh-echo": echo } : {}),
    ...(m.served !== undefined ? { "x-prefixmesh-served": String(m.served) } : {}),
  };
}

/**
 * A snapshot as it came off the wire: its bytes decoded by the core codec (within `maxBytes`) and its
 * headers read; a malformed header is left out (the node treats the field as absent), a body that
 * does not decode refuses the whole message.
 */
export function snapshotFromWire(
  bytes: Uint8Array,
  headers: IncomingHttpHeaders,
  maxBytes: number,
): Decoded<SnapshotMsg> {
  let snapshot: Snapshot;
  try {
    snapshot = decodeSnapshot(bytes, { maxBytes });
  } catch (err) {
    return { ok: false, error: `bad snapshot: ${(err as Error).message}` };
  }
  return { ok: true, msg: snapshotMsgFromWire(snapshot, headers) };
}

/** A snapshot already decoded by the core codec (possibly on a worker) with its headers read. */
export function snapshotMsgFromWire(snapshot: Snapshot, headers: IncomingHttpHeaders): SnapshotMsg {
  const msg: SnapshotMsg = { type: "snapshot", snapshot };
  const holds = parseHolds(headers["x-prefixmesh-holds"]);
  const blocks = parseCount(headers["x-prefixmesh-blocks"]);
  const at = parseClock(headers["x-prefixmesh-at"]);
  const echo = parseEcho(headers["x-prefixmesh-echo"]);
  const served = parseCount(headers["x-prefixmesh-served"]);
  if (holds) msg.holds = holds;
  if (blocks !== undefined) msg.blocks = blocks;
  if (at !== undefined) msg.at = at;
  if (echo) msg.echo = echo;
  if (served !== undefined) msg.served = served;
  return msg;
}

/** `x-prefixmesh-holds: <epoch>:<version>` — the ack piggybacked on a snapshot. */
export function formatHolds(h: HeldVersion | undefined): string | undefined {
  return h ? `${h.epoch}:${h.version}` : undefined;
}

export function parseHolds(v: string | string[] | undefined): HeldVersion | undefined {
  if (typeof v !== "string" || v.length > 64) return undefined;
  const m = /^(\d{1,16}):(\d{1,16})$/.exec(v);
  if (!m) return undefined;
  const epoch = Number(m[1]);
  const version = Number(m[2]);
  return Number.isSafeInteger(epoch) && Number.isSafeInteger(version) ? { epoch, version } : undefined;
}

/** A clock reading in ms (`x-prefixmesh-at`): finite, non-negative, short; else undefined. */
export function parseClock(v: string | string[] | undefined): number | undefined {
  if (typeof v !== "string" || !/^\d{1,16}(\.\d{1,6})?$/.test(v)) return undefined;
  return Number(v);
}

/**
 * `x-prefixmesh-echo: <t>:<heldMs>` — the receiver's last `at` sent back with how long it was held, so
 * the receiver measures a round trip on its own clock (no clock sync needed).
 */
export function formatEcho(e: SnapshotEcho | undefined): string | undefined {
  return e ? `${formatClock(e.t)}:${formatClock(e.heldMs)}` : undefined;
}

/** Fixed-point with µs resolution: never exponent notation, never more digits than `parseClock` takes. */
export function formatClock(ms: number): string {
  return ms.toFixed(3);
}

export function parseEcho(v: string | string[] | undefined): SnapshotEcho | undefined {
  if (typeof v !== "string" || v.length > 48) return undefined;
  const [t, heldMs, extra] = v.split(":");
  if (extra !== undefined) return undefined;
  const pt = parseClock(t);
  const ph = parseClock(heldMs);
  return pt !== undefined && ph !== undefined ? { t: pt, heldMs: ph } : undefined;
}

/** A small non-negative integer header (e.g. `x-prefixmesh-blocks`), or undefined if absent/invalid. */
export function parseCount(v: string | string[] | undefined): number | undefined {
  if (typeof v !== "string" || !/^\d{1,15}$/.test(v)) return undefined;
  return Number(v);
}

// ---------------------------------------------------------------- forwards

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
 * A forward as a binary channel frame: [u32 BE n][n bytes of JSON {"t":"fwd","k":K,"f":<forward
 * without request.tokens>}][the tokens as little-endian u32]. Raw tokens, not base64 in the JSON: a
 * smaller frame, and no text that both ends would encode, scan, validate and decode (BENCHMARKS.md,
 * "Forward frame sizes").
 * `withPrompt` false leaves the prompt text out (a peer whose engine runs from tokens alone).
 */
export function encodeForwardFrame(k: number, m: ForwardMsg, withPrompt = true): Buffer {
  const meta = Buffer.from(JSON.stringify({ t: "fwd", k, f: forwardFields(m, withPrompt) }));
  const t = m.request.tokens;
  const out = Buffer.allocUnsafe(4 + meta.length + t.byteLength);
  out.writeUInt32BE(meta.length, 0);
  meta.copy(out, 4);
  Buffer.from(t.buffer, t.byteOffset, t.byteLength).copy(out, 4 + meta.length);
  return out;
}

/**
 * A cancel as a channel frame, in the forward frame's layout with no tokens: [u32 BE n][n bytes of
 * JSON {"t":"cancel","k":K}, with "fin":true for a final cancel]. On the forward's own channel it
 * arrives after the forward it cancels.
 */
export function encodeCancelFrame(k: number, final = false): Buffer {
  const meta = Buffer.from(JSON.stringify(final ? { t: "cancel", k, fin: true } : { t: "cancel", k }));
  const out = Buffer.allocUnsafe(4 + meta.length);
  out.writeUInt32BE(meta.length, 0);
  meta.copy(out, 4);
  return out;
}

export type ForwardFrame =
  | { ok: true; k: number; msg: ForwardMsg }
  /** The origin cancels stream k (`final`: it takes no answer any more). */
  | { ok: true; k: number; msg: undefined; cancel: true; final?: true }
  /** A frame we can answer with a refusal on stream k… */
  | { ok: false; k: number; error: string }
  /** …or one that is not a forward frame at all (the channel closes). */
  | { ok: false; k: undefined; error: string };

export function decodeForwardFrame(frame: Buffer): ForwardFrame {
  const bad = (error: string) => ({ ok: false as const, k: undefined, error });
  if (frame.length < 4) return bad("frame too short");
  const n = frame.readUInt32BE(0);
  if (n > frame.length - 4) return bad("frame header longer than the frame");
  const tokenBytes = frame.length - 4 - n;
  if (tokenBytes % 4 !== 0 || tokenBytes / 4 > MAX_PROMPT_TOKENS) return bad("bad token bytes");
  let json: unknown;
  try {
    json = JSON.parse(frame.toString("utf8", 4, 4 + n));
  } catch {
    return bad("frame header is not JSON");
  }
  const parsed = channelForwardSchema.safeParse(json);
  if (!parsed.success) {
    const cancel = channelCancelSchema.safeParse(json);
    if (cancel.success && tokenBytes === 0)
      return cancel.data.fin
        ? { ok: true, k: cancel.data.k, msg: undefined, cancel: true, final: true }
        : { ok: true, k: cancel.data.k, msg: undefined, cancel: true };
    // Which stream to refuse, if the envelope at least is sound (a bad frame otherwise).
    const head = channelForwardHead.safeParse(json);
    if (!head.success) return bad("not a forward frame");
    return { ok: false, k: head.data.k, error: `bad forward: ${parsed.error.issues[0]?.message}` };
  }
  const tokens = new Uint32Array(tokenBytes / 4);
  Buffer.from(tokens.buffer).set(frame.subarray(4 + n));
  return { ok: true, k: parsed.data.k, msg: forwardMsg(parsed.data.f, tokens) };
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
function forwardFields(m: ForwardMsg, withPrompt: boolean, tokens?: string) {
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
function forwardMsg(f: z.infer<typeof forwardMetaSchema>, tokens: Uint32Array): ForwardMsg {
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

// ---------------------------------------------------------------- answers

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
