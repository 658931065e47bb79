/**
 * Wire formats of the peer transport (JSON parts; snapshots travel as the core codec's binary bytes).
 * Everything a peer sends is validated here with bounded sizes before it reaches the node.
 *
 * Forward stream (response of POST /peer/forward), NDJSON, one record per line:
 *   {"t":"chunk","text":"…"}*  then exactly one  {"t":"msg","msg":<result|error message>}
 * A stream that ends without the final record was cut off and is an error, never a short answer.
 */
import { z } from "zod";
import type { EngineRequest, EngineResult } from "../core/engine.js";
import type { HeldVersion, PeerMessage, SnapshotEcho } from "../core/node/types.js";
import { clusterIdSchema, nodeIdSchema } from "./node-id.js";

const MAX_PROMPT_TOKENS = 1 << 20;
const MAX_TEXT = 8 * 1024 * 1024;

/** Tokens travel as base64 of little-endian uint32: ~4x smaller and far faster to parse than a JSON array. */
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

const tokensB64 = z
  .string()
  .max(Math.ceil((MAX_PROMPT_TOKENS * 4) / 3) + 4)
  .regex(/^[A-Za-z0-9+/]*={0,2}$/, "tokens must be base64");

const engineRequestWire = z.object({
  id: z.string().min(1).max(256),
  tokens: tokensB64,
  prompt: z.string().max(MAX_TEXT).optional(),
  maxTokens: z.number().int().min(1).max(1_000_000),
  temperature: z.number().min(0).max(2).optional(),
  topP: z.number().gt(0).max(1).optional(),
  seed: z.number().int().optional(),
  stop: z.array(z.string().max(256)).max(16).optional(),
});

const engineResultWire = z.object({
  text: z.string().max(MAX_TEXT),
  completionTokens: z.number().int().min(0),
  promptTokens: z.number().int().min(0),
  cachedTokens: z.number().int().min(0),
  prefillMs: z.number().min(0),
  decodeMs: z.number().min(0),
  finishReason: z.enum(["stop", "length"]),
});

const reqRef = { reqId: z.string().min(1).max(256), attempt: z.number().int().min(0).max(1_000_000) };

export const forwardWireSchema = z.object({
  ...reqRef,
  hops: z.number().int().min(0).max(64),
  request: engineRequestWire,
  /** The origin's time budget for this attempt (optional: older peers send none). */
  deadlineMs: z.number().min(0).max(3_600_000).optional(),
});
/** A forward on the channel: the same fields, its tokens travelling as raw bytes beside them. */
const forwardMetaSchema = forwardWireSchema.extend({ request: engineRequestWire.omit({ tokens: true }) });

const resultWire = z.object({
  type: z.literal("result"),
  ...reqRef,
  result: engineResultWire,
  timing: z.object({
    servedBy: z.string().min(1).max(64),
    queueMs: z.number().min(0),
    prefillMs: z.number().min(0),
    decodeMs: z.number().min(0),
  }),
});
const errorWire = z.object({
  type: z.literal("error"),
  ...reqRef,
  error: z.string().max(4096),
  retryable: z.boolean(),
});
/**
 * Messages sent on their own (POST /peer/message): replies without an open stream, goodbye, and the
 * origin's cancel of a forward it moved on from (older peers answer it 400; it is best effort).
 */
export const messageWireSchema = z.discriminatedUnion("type", [
  resultWire,
  errorWire,
  z.object({ type: z.literal("goodbye") }),
  z.object({ type: z.literal("cancel"), ...reqRef }),
]);

const chunkRecord = z.object({ t: z.literal("chunk"), text: z.string().max(MAX_TEXT) });
const finalRecord = z.object({
  t: z.literal("msg"),
  msg: z.discriminatedUnion("type", [resultWire, errorWire]),
});
export const streamRecordSchema = z.discriminatedUnion("t", [chunkRecord, finalRecord]);

/**
 * Forward channel (a WebSocket on the peer port, GET /peer/channel): many forwards multiplexed on one
 * connection, each named by a stream number `k` the origin picks. Origin → peer, a binary frame:
 *   {"t":"fwd","k":K,"f":<forward, as POST /peer/forward's body without tokens>} + raw tokens
 *   (see encodeForwardFrame)
 * Peer → origin: the forward stream's records with its `k`, or a refusal of a malformed forward,
 *   {"t":"ack","k":K}?  {"t":"chunk","k":K,"text":"…"}*  then  {"t":"msg","k":K,"msg":…}
 *   | {"t":"rej","k":K,"error":"…"}
 * (`ack`: the peer accepted the forward; left out when a chunk or the answer leaves first.)
 * as a JSON array per frame: the records one event-loop turn produced (typically a forward's last
 * chunk and its final message) leave in one frame and one write, waking the origin once.
 * A channel that closes with streams open has cut them off: an error for each, never a short answer.
 */
export const CHANNEL_PATH = "/peer/channel";
const streamNo = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
const channelForwardHead = z.object({ t: z.literal("fwd"), k: streamNo });
const channelForwardSchema = channelForwardHead.extend({ f: forwardMetaSchema });

/**
 * A forward as a binary channel frame: [u32 BE n][n bytes of JSON {"t":"fwd","k":K,"f":<forward
 * without request.tokens>}][the tokens as little-endian u32]. Raw tokens, not base64 in the JSON: a
 * 540-token prompt is 2.2 KB instead of 2.9 KB that both ends would encode, scan, validate and decode.
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

export type ForwardFrame =
  | { ok: true; k: number; msg: ForwardMsg }
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
    // Which stream to refuse, if the envelope at least is sound (a bad frame otherwise).
    const head = channelForwardHead.safeParse(json);
    if (!head.success) return bad("not a forward frame");
    return { ok: false, k: head.data.k, error: `bad forward: ${parsed.error.issues[0]?.message}` };
  }
  const tokens = new Uint32Array(tokenBytes / 4);
  Buffer.from(tokens.buffer).set(frame.subarray(4 + n));
  return { ok: true, k: parsed.data.k, msg: forwardMsg(parsed.data.f, tokens) };
}
export const channelRecordSchema = z.discriminatedUnion("t", [
  chunkRecord.extend({ k: streamNo }),
  finalRecord.extend({ k: streamNo }),
  z.object({ t: z.literal("rej"), k: streamNo, error: z.string().max(4096) }),
  z.object({ t: z.literal("ack"), k: streamNo }),
]);
export const MAX_RECORDS_PER_FRAME = 4096;
export const channelFrameSchema = z.array(channelRecordSchema).min(1).max(MAX_RECORDS_PER_FRAME);

/**
 * What a node answers on `GET /peer/hello`: who it is, which cluster and model it serves, which
 * protocol it speaks. Unknown fields are ignored (newer peers may add some); `checkPeerHello` decides
 * whether the answer makes its sender a peer.
 */
export const helloSchema = z.object({
  id: nodeIdSchema,
  cluster: clusterIdSchema,
  model: z.string().min(1).max(256),
  protocol: z.number().int().min(0).max(1_000_000),
  /** false: this node's engine needs only the tokens; forwards to it may leave the prompt text out. */
  promptText: z.boolean().optional(),
});
export type PeerHello = z.infer<typeof helloSchema>;
/** A peer's refusal of a forward without the prompt text its engine needs (defined by the core node). */
export { PROMPT_TEXT_NEEDED } from "../core/node/types.js";
export const PROTOCOL_VERSION = 1;

export type ForwardMsg = Extract<PeerMessage, { type: "forward" }>;
export type ReplyMsg = Extract<PeerMessage, { type: "result" | "error" }>;
export type CancelMsg = Extract<PeerMessage, { type: "cancel" }>;

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
    stop: r.stop,
  };
}

/** A forward's wire fields, without its tokens (which travel base64 in JSON, or as raw bytes). */
function forwardFields(m: ForwardMsg, withPrompt: boolean, tokens?: string) {
  return {
    reqId: m.reqId,
    attempt: m.attempt,
    hops: m.hops,
    deadlineMs: m.deadlineMs,
    request: requestFields(m.request, withPrompt, tokens),
  };
}

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
  return msg;
}

/** A forward as it came off the wire (parsed JSON), validated and decoded; or why it was refused. */
export function parseForward(json: unknown): { ok: true; msg: ForwardMsg } | { ok: false; error: string } {
  const parsed = forwardWireSchema.safeParse(json);
  if (!parsed.success) return { ok: false, error: `bad forward: ${parsed.error.issues[0]?.message}` };
  try {
    return { ok: true, msg: forwardFromWire(parsed.data) };
  } catch (err) {
    return { ok: false, error: `bad forward: ${(err as Error).message}` };
  }
}

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
  };
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

/**
 * What travels beside a snapshot's bytes (headers): the ack, the sender's block count, and the clock
 * stamp + echo from which each side measures its round trip to the other.
 */
export interface SnapshotMeta {
  holds?: HeldVersion | undefined;
  blocks?: number | undefined;
  at?: number | undefined;
  echo?: SnapshotEcho | undefined;
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
