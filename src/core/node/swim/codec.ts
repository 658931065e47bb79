/**
 * The SWIM messages' wire format, so a runtime can carry them and the simulator counts their exact
 * bytes: one type byte, then varints (non-negative integers) and ids as a length byte + ASCII (node
 * ids are ≤ 64 printable ASCII characters, config.ts). An update is id, a flags byte (status in the low
 * two bits, bit 2 = `from` follows), incarnation, [from]. Decoding bounds every count a peer controls.
 */
import { ByteReader } from "../../byte-reader.js";
import { varintSize, writeVarint } from "../../varint.js";
import type { MemberStatus, MemberUpdate, SwimMessage } from "./types.js";

const TYPES = ["ping", "ping-req", "ack", "nack", "gossip", "sync", "goodbye"] as const;
const STATUSES: readonly MemberStatus[] = ["alive", "suspect", "dead", "left"];
const MAX_ID = 64;
/** Highest incarnation carried: larger ones are not exact numbers here (a peer's are refused). */
export const MAX_INCARNATION = Number.MAX_SAFE_INTEGER;
const ID_CHARS = /^[A-Za-z0-9._-]+$/;

export class SwimDecodeError extends Error {
  /**
   * The message's type byte is none this build knows: what a newer build's new message looks like (or
   * garbage; only the sender's hello tells them apart: server/runtime/mesh-peers.ts).
   */
  readonly unknownKind: boolean;
  constructor(message: string, unknownKind = false) {
    super(`bad swim message: ${message}`);
    this.name = "SwimDecodeError";
    this.unknownKind = unknownKind;
  }
}

function idSize(id: string): number {
  return 1 + id.length;
}

function updateSize(u: MemberUpdate): number {
  return idSize(u.id) + 1 + varintSize(u.incarnation) + (u.from === undefined ? 0 : idSize(u.from));
}

function updatesSize(us: readonly MemberUpdate[]): number {
  let n = varintSize(us.length);
  for (const u of us) n += updateSize(u);
  return n;
}

/** Bytes `encodeSwim(msg)` produces, without building them. */
export function swimSize(msg: SwimMessage): number {
  switch (msg.type) {
    case "ping":
    case "ack":
      return 1 + varintSize(msg.seq) + updatesSize(msg.updates);
    case "ping-req":
      return 1 + varintSize(msg.seq) + idSize(msg.target) + updatesSize(msg.updates);
    case "nack":
      return 1 + varintSize(msg.seq);
    case "gossip":
      return 1 + updatesSize(msg.updates);
    case "sync":
      return 2 + updatesSize(msg.members);
    case "goodbye":
      return 1 + varintSize(msg.incarnation);
  }
}

export function encodeSwim(msg: SwimMessage): Uint8Array {
  const buf = new Uint8Array(swimSize(msg));
  let pos = 0;
  const id = (s: string): void => {
    buf[pos++] = s.length;
    for (let i = 0; i < s.length; i++) buf[pos++] = s.charCodeAt(i);
  };
  const updates = (us: readonly MemberUpdate[]): void => {
    pos = writeVarint(buf, pos, us.length);
    for (const u of us) {
      id(u.id);
      buf[pos++] = STATUSES.indexOf(u.status) | (u.from === undefined ? 0 : 4);
      pos = writeVarint(buf, pos, u.incarnation);
      if (u.from !== undefined) id(u.from);
    }
  };
  buf[pos++] = TYPES.indexOf(msg.type);
  switch (msg.type) {
    case "ping":
    case "ack":
      pos = writeVarint(buf, pos, msg.seq);
      updates(msg.updates);
      break;
    case "ping-req":
      pos = writeVarint(buf, pos, msg.seq);
      id(msg.target);
      updates(msg.updates);
      break;
    case "nack":
      pos = writeVarint(buf, pos, msg.seq);
      break;
    case "gossip":
      updates(msg.updates);
      break;
    case "sync":
      buf[pos++] = msg.reply ? 1 : 0;
      updates(msg.members);
      break;
    case "goodbye":
      pos = writeVarint(buf, pos, msg.incarnation);
      break;
  }
  if (pos !== buf.length) throw new Error(`swim codec: wrote ${pos} of ${buf.length} bytes`);
  return buf;
}

/** Decodes one message; throws SwimDecodeError on anything malformed or over `maxEntries`. */
export function decodeSwim(bytes: Uint8Array, maxEntries = 8_192): SwimMessage {
  const r = new ByteReader(bytes, (why) => new SwimDecodeError(why));
  const byte = () => r.byte();
  const varint = () => r.varint();
  const incarnation = (): number => {
    const v = varint();
    if (v > MAX_INCARNATION) throw new SwimDecodeError("incarnation too large");
    return v;
  };
  const id = (): string => {
    const n = byte();
    if (n < 1 || n > MAX_ID) throw new SwimDecodeError("bad id length");
    const s = String.fromCharCode(...r.take(n, "bad id length"));
    if (!ID_CHARS.test(s)) throw new SwimDecodeError("bad id characters");
    return s;
  };
  const updates = (): MemberUpdate[] => {
    const n = varint();
    if (n > maxEntries) throw new SwimDecodeError(`${n} entries, at most ${maxEntries}`);
    const out: MemberUpdate[] = [];
    for (let i = 0; i < n; i++) {
      const uid = id();
      const flags = byte();
      if (flags > 7) throw new SwimDecodeError("bad update flags");
      const u: MemberUpdate = {
        id: uid,
        status: STATUSES[flags & 3] as MemberStatus,
        incarnation: incarnation(),
      };
      if (flags & 4) u.from = id();
      out.push(u);
    }
    return out;
  };
  const type = TYPES[byte()];
  let msg: SwimMessage;
  switch (type) {
    case "ping":
    case "ack":
      msg = { type, seq: varint(), updates: updates() };
      break;
    case "ping-req": {
      const seq = varint();
      msg = { type, seq, target: id(), updates: updates() };
      break;
    }
    case "nack":
      msg = { type, seq: varint() };
      break;
    case "gossip":
      msg = { type, updates: updates() };
      break;
    case "sync": {
      const reply = byte();
      if (reply > 1) throw new SwimDecodeError("bad reply flag");
      msg = { type, reply: reply === 1, members: updates() };
      break;
    }
    case "goodbye":
      msg = { type, incarnation: incarnation() };
      break;
    default:
      throw new SwimDecodeError("unknown type", true);
  }
  r.end();
  return msg;
}
