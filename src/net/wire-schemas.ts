/**
 * What a peer may send, as zod schemas with bounded sizes: everything is validated against these
 * before it is mapped to a `PeerMessage` (transport-wire.ts) and reaches the node. The record and frame
 * layouts themselves are described in transport-wire.ts.
 */
import { z } from "zod";
import { MAX_ADAPTER_NAME, MAX_CACHE_SALT } from "../core/namespace.js";
import { MAX_MODEL_NAME, MAX_MODELS } from "../core/node/models.js";
import { clusterIdSchema, nodeIdSchema } from "./node-id.js";

export const MAX_PROMPT_TOKENS = 1 << 20;
/** A client request id (`x-request-id`): letters, digits and `._~:@+=/-`, as tracing systems make them. */
export const REQUEST_ID_PATTERN = /^[A-Za-z0-9._~:@+=/-]{1,128}$/;
const MAX_TEXT = 8 * 1024 * 1024;

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
  presencePenalty: z.number().min(-2).max(2).optional(),
  frequencyPenalty: z.number().min(-2).max(2).optional(),
  stop: z.array(z.string().max(256)).max(16).optional(),
  /** The request's cache namespace (src/core/namespace.ts); older peers send neither. */
  cacheSalt: z.string().max(MAX_CACHE_SALT).optional(),
  adapter: z.string().min(1).max(MAX_ADAPTER_NAME).optional(),
  /** The model the client asked for, and the tokenizer that made `tokens` when not its (mixed meshes). */
  model: z.string().min(1).max(MAX_MODEL_NAME).optional(),
  tokenizer: z.string().min(1).max(MAX_MODEL_NAME).optional(),
  /** A chat's messages, with `tokenizer`: the serving node renders them with its own chat template. */
  messages: z
    .array(
      z.object({
        role: z.enum(["system", "user", "assistant", "tool", "developer"]),
        content: z.string().max(MAX_TEXT),
      }),
    )
    .max(4096)
    .optional(),
  /** The entry node's client request id (api.md: `x-request-id`), for the serving node's logs. */
  traceId: z
    .string()
    .regex(REQUEST_ID_PATTERN, "traceId must be a request id (1-128 safe characters)")
    .optional(),
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
  /** What is left of the origin's wait bound (`maxWaitMs`) for this attempt to start (optional). */
  waitMs: z.number().min(0).max(3_600_000).optional(),
});
/** A forward on the channel: the same fields, its tokens travelling as raw bytes beside them. */
export const forwardMetaSchema = forwardWireSchema.extend({
  request: engineRequestWire.omit({ tokens: true }),
});

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
  /** The server's queue depth as the answer left (freshPeerLoad; optional: older peers send none). */
  queueDepth: z.number().int().min(0).max(1_000_000).optional(),
});
const errorWire = z.object({
  type: z.literal("error"),
  ...reqRef,
  error: z.string().max(4096),
  retryable: z.boolean(),
  /** A refusal for fit: the sender's limits (optional: older peers send none; older nodes drop it). */
  limits: z
    .object({
      contextTokens: z.number().int().min(1).max(100_000_000).optional(),
      maxTokens: z.number().int().min(1).max(100_000_000).optional(),
    })
    .optional(),
  /**
   * A failed run: whose fault (optional: older peers send none, older nodes drop it; a value this
   * node does not know reads as none, so a newer peer's error still counts).
   */
  fault: z.enum(["input", "load", "engine"]).optional().catch(undefined),
});
/**
 * Messages sent on their own (POST /peer/message): replies without an open stream, goodbye, and the
 * origin's cancel of a forward it moved on from (older peers answer it 400; it is best effort).
 */
export const messageWireSchema = z.discriminatedUnion("type", [
  resultWire,
  errorWire,
  z.object({ type: z.literal("goodbye") }),
  // `final`: the origin takes no answer any more, so a started run may be aborted (abort-runs.ts).
  z.object({ type: z.literal("cancel"), ...reqRef, final: z.literal(true).optional() }),
]);

const chunkRecord = z.object({ t: z.literal("chunk"), text: z.string().max(MAX_TEXT) });
const finalRecord = z.object({
  t: z.literal("msg"),
  msg: z.discriminatedUnion("type", [resultWire, errorWire]),
});
/** A record of a forward's NDJSON answer stream (HTTP). */
export const streamRecordSchema = z.discriminatedUnion("t", [chunkRecord, finalRecord]);

const streamNo = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
/** A channel forward frame's envelope: enough to refuse stream k when the forward inside is bad. */
export const channelForwardHead = z.object({ t: z.literal("fwd"), k: streamNo });
export const channelForwardSchema = channelForwardHead.extend({ f: forwardMetaSchema });
/** A channel cancel frame: the origin gave up on stream k (it travels behind the forward it cancels). */
export const channelCancelSchema = z.object({
  t: z.literal("cancel"),
  k: streamNo,
  fin: z.literal(true).optional(),
});
/** A record of the channel's answer direction. */
export const channelRecordSchema = z.discriminatedUnion("t", [
  chunkRecord.extend({ k: streamNo }),
  finalRecord.extend({ k: streamNo }),
  z.object({ t: z.literal("rej"), k: streamNo, error: z.string().max(4096) }),
  // `e`: the acking node's epoch (absent from older peers).
  z.object({
    t: z.literal("ack"),
    k: streamNo,
    e: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
  }),
]);
export const MAX_RECORDS_PER_FRAME = 4096;
export const channelFrameSchema = z.array(channelRecordSchema).min(1).max(MAX_RECORDS_PER_FRAME);

const MAX_PROTOCOL = 1_000_000;

/**
 * What a node answers on `GET /peer/hello`: who it is, which cluster and model it serves, which
 * protocol it speaks. Unknown fields are ignored (newer peers may add some); `checkPeerHello` decides
 * whether the answer makes its sender a peer.
 */
export const helloSchema = z
  .object({
    id: nodeIdSchema,
    cluster: clusterIdSchema,
    model: z.string().min(1).max(256),
    /** The newest protocol version the node speaks. */
    protocol: z.number().int().min(0).max(MAX_PROTOCOL),
    /** The oldest it still speaks (protocol-range.ts); absent: `protocol` only (older nodes). */
    minProtocol: z.number().int().min(0).max(MAX_PROTOCOL).optional(),
    /**
     * Its anti-entropy mode (`--gossip`): nodes in different modes cannot form one mesh (a full-mesh
     * node never sends SWIM or digests), so a hello saying another mode is refused. Older nodes omit it.
     */
    gossip: z.enum(["full", "scuttlebutt"]).optional(),
    /**
     * true: in shared-secret mode, this node's 101 answer to a forward channel's upgrade carries a
     * channel MAC (auth/channel-mac.ts), and a peer refuses one that does not. Nodes before it omit it
     * (a new field, not a new protocol number: builds that compare numbers for equality would refuse that).
     */
    channelAcceptMac: z.boolean().optional(),
    /** false: this node's engine needs only the tokens; forwards to it may leave the prompt text out. */
    promptText: z.boolean().optional(),
    /**
     * Every model this node serves: `model` and its LoRA adapters (mixed meshes). Optional: a peer that
     * sends none serves `model` alone.
     */
    models: z.array(z.string().min(1).max(MAX_MODEL_NAME)).min(1).max(MAX_MODELS).optional(),
    /** Tokens of KV cache this node has: our estimate of it never holds more (older nodes omit it). */
    capacityTokens: z.number().int().positive().max(Number.MAX_SAFE_INTEGER).optional(),
    /**
     * Its SWIM incarnation now (`--gossip scuttlebutt`): what a check of its new life holds it at, not
     * a relay's claim (core swim/own-word.ts). Older nodes, and the full mesh, omit it.
     */
    incarnation: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
  })
  .refine((h) => h.minProtocol === undefined || h.minProtocol <= h.protocol, {
    message: "must not exceed protocol",
    path: ["minProtocol"],
  });
export type PeerHello = z.infer<typeof helloSchema>;
