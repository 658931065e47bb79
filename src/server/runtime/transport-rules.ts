/**
 * The daemon's transport rules: protocol decisions the core node does not make, because they follow
 * from how the daemon's transport carries messages (answers come back on the forward's own reliable
 * stream; peers may run other engines). The simulator's network delivers `PeerMessage`s as they are
 * and has none of them. Every such rule is listed here — named, with why and where it applies — and
 * code elsewhere refers to a rule by its name in [brackets].
 *
 * [Transport acks] A forward's answer comes back on its own stream, so the carrier's ack stands for the
 *   peer's `forward-ack`.
 *   - Serving side: the node's `forward-ack` effect goes out on the forward's answer stream (HTTP: its
 *     response headers; channel: an `ack` record), on the newest stream when the forward was sent
 *     again (`ServedForwards.ack`).
 *     The node holds the ack back (`ackDeferMs`, DAEMON_NODE_DEFAULTS) and drops it when the answer
 *     leaves first; the stream drops one that a chunk already implied (net/reply-stream.ts).
 *   - Origin side: the carrier's ack (HTTP response headers; a channel `ack` record or first chunk) is
 *     fed to the node as a `forward-ack` without an ETA (net/forward-wire.ts `carrierAck`, in
 *     `PeerSender.forward`), with the epoch the node's ack said (HTTP: `x-prefixmesh-epoch`; channel:
 *     the record's `e`); an ack a chunk implied says none, and the origin treats it as an older peer's.
 *   - So nobody probes: the daemon's node runs with `answerProbes: false` (start-node.ts); a broken
 *     stream fails its forward at once instead [Refused is not unreachable].
 * [Prompt text] A forward without the prompt text, to a node whose engine needs it (restarted with
 *   another engine since its hello said otherwise), is refused by the node (`needsPromptText`,
 *   serving.ts) with `PROMPT_TEXT_NEEDED`; the origin's transport re-sends it at once with the text
 *   and sends the text from then on (net/transport-client.ts, `forwardTokensOnly`).
 * [Current attempt] A streaming client gets output only from the node its request waits for now
 *   (`mayReachClient`, asking `PrefixNode.servingNow` per chunk): a slow peer the node fell back from
 *   may keep streaming, and its words are dropped. The splice across a fallback is client-streams.ts.
 * [Refused is not unreachable] A peer that answers with an HTTP refusal or garbles its answer is up
 *   (`isRefusal`): a forward it refused becomes a retryable `error` from it (fall back, no suspicion);
 *   any other failure is a `send-failed` input (suspect it at once and fall back). A lone message
 *   refused is only logged. Cancels and goodbyes are best effort: their failures are ignored.
 * [Answer on the stream] A `result`/`error` for a forward whose answer stream is open ends that stream
 *   and any copies (`ServedForwards.answer`); otherwise it goes on a request of its own.
 * [Refused peers] A peer whose hello showed another cluster, model or id is sent nothing until a
 *   re-check of its hello passes (`Admin.refusal`, static-peer-checks.ts); what the node sends it
 *   meanwhile fails as if it were unreachable (`send-failed`).
 * [One snapshot in flight] Anti-entropy tolerates loss, so a round skips a peer whose last snapshot has
 *   not been delivered yet (`PeerSender.snapshot`).
 * [Stream TTL] A forward's answer stream the node never answers is closed with a retryable error after
 *   `forwardStreamTtlMs` (`ServedForwards.sweep`; start-node.ts: a few forward timeouts, by when its
 *   origin has long moved on).
 * [Cancel behind the forward] A cancel for a forward still open on the forward channel travels on
 *   that channel, behind it (`ForwardChannel.cancel`); the channel server hands the forwards it read in
 *   one event-loop turn to the node at the turn's end, a cancelled one after its cancel. So a node
 *   resumed after a freeze drops the forwards its origins gave up on (cancelledForwards; one in another
 *   model's tokens is answered before tokenizing: early-cancels.ts) instead of starting them on an idle
 *   engine. Over HTTP a cancel is a request of its own, read in no set order.
 * [Shutting down] Forwards that arrive are refused (retryable); the poll timer is no longer fed back;
 *   what is still open at the end of the drain is answered retryable (node-runtime.ts: `onForward`,
 *   `onTimer`, `shutdown`).
 */
import type { ForwardLimits, RunFault } from "../../core/node/types.js";
import { TransportError } from "../../net/transport-client.js";
import type { ReplyMsg } from "../../net/transport-wire.js";

/**
 * An error answer to a forward that the origin may retry elsewhere (every one the daemon makes up);
 * `limits` when it is refused for not fitting this node (core peer-limits.ts); `fault` when our
 * engine failed a step of it (engine-step-errors.ts `runFaultOf`).
 */
export function retryableError(
  f: { reqId: string; attempt: number },
  error: string,
  limits?: ForwardLimits,
  fault?: RunFault,
): ReplyMsg {
  return {
    type: "error",
    reqId: f.reqId,
    attempt: f.attempt,
    error,
    retryable: true,
    ...(limits ? { limits } : {}),
    ...(fault ? { fault } : {}),
  };
}

/** [Current attempt] Whether output from `source` may reach the client whose request waits for `servingNow`. */
export function mayReachClient(servingNow: string | undefined, source: string): boolean {
  return servingNow === source;
}

/** [Refused is not unreachable] The peer is up and refused or garbled the message (an HTTP status, or a protocol error). */
export function isRefusal(err: unknown): err is TransportError {
  return err instanceof TransportError && (err.kind === "http" || err.kind === "protocol");
}
