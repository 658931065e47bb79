/**
 * Frame integrity for the forward channel in shared-secret mode. The channel's upgrade request is
 * signed and replay-checked like every peer request, but after it the socket is plain TCP; so each
 * frame carries a truncated HMAC over a per-direction sequence number and the payload, keyed from the
 * secret, the upgrade's nonce and the two node ids. A frame injected, altered, replayed, reordered or
 * moved from another channel fails `open`, and the channel is closed; nothing of a frame is outside the
 * tag (the sequence number is implicit), and the 101 answer before the frames carries a tag too
 * (below). (In mTLS mode TLS already gives this; in insecure mode nothing does.) WebSocket control
 * frames (ping, close) are not covered: an on-path attacker can only end the channel with them,
 * which it can do by resetting the connection anyway.
 */
import { createHmac, timingSafeEqual } from "node:crypto";

export const FRAME_TAG_BYTES = 16;

export interface FrameMac {
  /** The frame to send: tag ‖ payload. Call in wire order: the sequence number advances. */
  seal(payload: Buffer): Buffer;
  /** The payload of a received frame, or undefined if its tag is wrong (the channel must close). */
  open(frame: Buffer): Buffer | undefined;
}

/** What makes a channel's keys its own: the upgrade's (signed) nonce and who opened it to whom. */
export interface ChannelBinding {
  nonce: string;
  /** The node that opened the channel (the upgrade's sender). */
  client: string;
  /** The node it was opened to (the upgrade's destination). */
  server: string;
}

/** What the frame keys are derived under (and what a channel's 101 answer vouches for, below). */
const FRAME_CONTEXT = "prefixmesh-channel/2";

export function frameMac(secret: Uint8Array, binding: ChannelBinding, side: "client" | "server"): FrameMac {
  const mac = sequencedMac(secret, `${FRAME_CONTEXT}|${bindingLabel(binding)}`, side);
  return {
    seal(payload) {
      return Buffer.concat([mac.tag(payload), payload]);
    },
    open(frame) {
      if (frame.length < FRAME_TAG_BYTES) return undefined;
      const payload = frame.subarray(FRAME_TAG_BYTES);
      return mac.check(frame.subarray(0, FRAME_TAG_BYTES), payload) ? payload : undefined;
    },
  };
}

/** Who talks to whom under which signed nonce, as a key label. */
export function bindingLabel({ nonce, client, server }: ChannelBinding): string {
  // Node ids and nonces never contain `|` (both are validated), so the label is unambiguous.
  return `${client}|${server}|${nonce}`;
}

/**
 * The construction itself, for any ordered exchange bound to a signed request (the channel's frames;
 * an HTTP answer's head and records, response-mac.ts): per direction, a key HMAC(secret, label|dir)
 * and a truncated HMAC over the implicit sequence number and the payload.
 */
export interface SequencedMac {
  /** The tag of the next payload sent (the send sequence number advances). */
  tag(payload: Buffer | string): Buffer;
  /** Whether `tag` is the next received payload's (the receive sequence number advances only then). */
  check(tag: Buffer, payload: Buffer | string): boolean;
}

export function sequencedMac(secret: Uint8Array, label: string, side: "client" | "server"): SequencedMac {
  const key = (dir: string) => createHmac("sha256", secret).update(`${label}|${dir}`).digest();
  // Each key on first use: an HTTP answer is sealed one way only, once per request.
  let sendKey: Buffer | undefined;
  let recvKey: Buffer | undefined;
  let sendSeq = 0;
  let recvSeq = 0;
  const seq = Buffer.alloc(8);
  const tag = (k: Buffer, n: number, payload: Buffer | string): Buffer => {
    seq.writeUIntBE(n, 2, 6); // 2^48 payloads per direction: far beyond a connection's life
    return createHmac("sha256", k).update(seq).update(payload).digest().subarray(0, FRAME_TAG_BYTES);
  };
  return {
    tag(payload) {
      sendKey ??= key(side === "client" ? "c2s" : "s2c");
      return tag(sendKey, sendSeq++, payload);
    },
    check(t, payload) {
      if (t.length !== FRAME_TAG_BYTES) return false;
      recvKey ??= key(side === "client" ? "s2c" : "c2s");
      if (!timingSafeEqual(t, tag(recvKey, recvSeq, payload))) return false;
      recvSeq++;
      return true;
    },
  };
}

/**
 * The channel's `101 Switching Protocols` answer, in shared-secret mode. The upgrade request is signed
 * but a 101 carries no body and comes before the first frame, so without a tag of its own anyone on
 * the path could answer it and the client would only learn so from a failing first frame, as a
 * generic failure. The serving node tags its 101 with the construction above (keyed from the secret
 * and the upgrade's binding: its nonce, who opened it to whom) over what the answer settles: the
 * WebSocket accept key (bound to this handshake's key), the extensions and subprotocol it agreed to,
 * the request's signature and the frame scheme the channel will run. (mTLS: the 101 travels inside
 * TLS pinned to the peer's certificate, which already proves who answered; insecure: nothing does.)
 */
export const HEADER_CHANNEL_MAC = "x-prefixmesh-channel-mac";
/** What the 101's key is derived under: a change to what is covered changes it. */
const ACCEPT_CONTEXT = "prefixmesh-channel-accept/1";

/** What a channel's 101 answer settles, as sent (server) or received (client). */
export interface ChannelAccept {
  /** `Sec-WebSocket-Accept`: the server's answer to this handshake's `Sec-WebSocket-Key`. */
  accept: string;
  /** `Sec-WebSocket-Extensions` as answered ("" for none: no compression). */
  extensions: string;
  /** `Sec-WebSocket-Protocol` as answered ("" for none). */
  protocol: string;
  /** The upgrade request's `x-prefixmesh-signature`: the exact request answered, beyond its nonce. */
  signature: string;
}

/** The 101 answer's tag (hex), by the node the upgrade was sent to. */
export function channelAcceptTag(secret: Uint8Array, binding: ChannelBinding, a: ChannelAccept): string {
  return acceptMac(secret, binding, "server").tag(acceptPayload(a)).toString("hex");
}

/** Whether `tag` is the 101 answer's of the node `binding.server` to the upgrade `binding` names. */
export function checkChannelAcceptTag(
  secret: Uint8Array,
  binding: ChannelBinding,
  a: ChannelAccept,
  tag: unknown,
): boolean {
  if (typeof tag !== "string" || tag.length !== FRAME_TAG_BYTES * 2 || !/^[0-9a-f]+$/.test(tag)) return false;
  return acceptMac(secret, binding, "client").check(Buffer.from(tag, "hex"), acceptPayload(a));
}

function acceptMac(secret: Uint8Array, binding: ChannelBinding, side: "client" | "server"): SequencedMac {
  return sequencedMac(secret, `${ACCEPT_CONTEXT}|${bindingLabel(binding)}`, side);
}

/** One line each (header values hold no newline): the status, the answer's fields, the frame scheme. */
function acceptPayload(a: ChannelAccept): string {
  return [
    "101",
    a.accept,
    a.extensions,
    a.protocol,
    a.signature,
    FRAME_CONTEXT,
    String(FRAME_TAG_BYTES),
  ].join("\n");
}
