/**
 * Frame integrity for the forward channel in shared-secret mode. The channel's upgrade request is
 * signed and replay-checked like every peer request, but after it the socket is plain TCP; so each
 * frame carries a truncated HMAC over a per-direction sequence number and the payload, keyed from the
 * secret, the upgrade's nonce and the two node ids. A frame injected, altered, replayed, reordered or
 * moved from another channel fails `open`, and the channel is closed; nothing of a frame is outside the
 * tag (the sequence number is implicit). (In mTLS mode TLS already gives this; in insecure mode nothing
 * does.) WebSocket control frames (ping, close) are not covered: an on-path attacker can only end the
 * channel with them, which it can do by resetting the connection anyway.
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

export function frameMac(secret: Uint8Array, binding: ChannelBinding, side: "client" | "server"): FrameMac {
  const mac = sequencedMac(secret, `prefixmesh-channel/2|${bindingLabel(binding)}`, side);
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
