/**
 * The forward channel's binary frames, origin to peer (transport-wire.ts has the layout): a forward
 * with its tokens as raw bytes, and a cancel; decoded and validated, or refused.
 */
import { forwardFields, forwardMsg } from "./forward-wire.js";
import type { ForwardMsg } from "./transport-wire.js";
import {
  channelCancelSchema,
  channelForwardHead,
  channelForwardSchema,
  MAX_PROMPT_TOKENS,
} from "./wire-schemas.js";

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
