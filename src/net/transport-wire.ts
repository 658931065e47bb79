/**
 * The wire form of every `PeerMessage` (src/core/node/peer-messages.ts), both ways: the one place that maps
 * the core's messages to bodies, headers and records and back. The carriers (transport-client.ts and
 * transport-server.ts over HTTP, channel-client.ts and channel-server.ts over the forward channel) move
 * what this module makes and hand back what it decodes; they never build or read a message's fields.
 * Everything a peer sends is validated first (wire-schemas.ts; the core codec for snapshots).
 * Here: the messages' types, the protocol's version and paths; the codecs are its siblings: lone
 * messages' requests (lone-wire.ts), snapshots (snapshot-wire.ts), forwards (forward-wire.ts; the
 * channel's frames: forward-frame.ts) and answers (answer-wire.ts).
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
import type { PeerMessage } from "../core/node/types.js";

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

/** A decoded message, or why it was refused. */
export type Decoded<T> = { ok: true; msg: T } | { ok: false; error: string };
