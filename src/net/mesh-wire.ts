/**
 * The wire form of the core's mesh messages (`gossip: "scuttlebutt"`: SWIM membership and Scuttlebutt
 * anti-entropy), one per `POST /peer/mesh`, authenticated like every other peer request (mutual TLS,
 * or the HMAC over the whole body). Body:
 *
 *   u8 channel (0 swim, 1 gossip) · varint n · n × (id: u8 length + ASCII, url: u8 length + ASCII)
 *   · the message in the core's own codec (swim/codec.ts, gossip/codec.ts)
 *
 * The addresses say where the ids the message names can be reached: the sender's own first, then
 * those of the members it mentions (a member learned by gossip has an id, not an address). They are
 * hints, never credentials: a node is admitted only once the runtime has reached it at that address
 * and it proved its id (mesh-verifier.ts). Every count and length a peer controls is bounded.
 */

import { ByteReader } from "../core/byte-reader.js";
import { decodeGossip, encodeGossip, GossipDecodeError } from "../core/node/gossip/codec.js";
import { decodeSwim, encodeSwim, SwimDecodeError } from "../core/node/swim/codec.js";
import type { MeshMessage, NodeId } from "../core/node/types.js";
import { varintSize, writeVarint } from "../core/varint.js";
import { NODE_ID_PATTERN } from "./node-id.js";

export const MESH_PATH = "/peer/mesh";
/** Most addresses on one message (a sync lists every member; the rest are learned later). */
export const MAX_MESH_ADDRS = 64;
/** Longest peer URL carried (scheme://host:port). */
export const MAX_MESH_URL = 255;
/** Most entries in one swim message or gossip digest, and states in one gossip message. */
export const MESH_DECODE_LIMITS = { maxEntries: 8_192, maxStates: 256 };

export interface MeshAddress {
  id: NodeId;
  url: string;
}

export interface MeshEnvelope {
  msg: MeshMessage;
  addrs: MeshAddress[];
}

/** A peer URL as carried: http(s), host and port only, ASCII, bounded. */
export function meshUrlOk(url: string): boolean {
  if (url.length === 0 || url.length > MAX_MESH_URL || !/^[\x21-\x7e]+$/.test(url)) return false;
  try {
    const u = new URL(url);
    return (u.protocol === "http:" || u.protocol === "https:") && u.origin === url;
  } catch {
    return false;
  }
}

export function encodeMesh(msg: MeshMessage, addrs: readonly MeshAddress[]): Uint8Array {
  const payload = msg.channel === "swim" ? encodeSwim(msg.msg) : encodeGossip(msg.msg);
  const list = addrs.slice(0, MAX_MESH_ADDRS);
  let size = 1 + varintSize(list.length) + payload.length;
  for (const a of list) size += 2 + a.id.length + a.url.length;
  const buf = new Uint8Array(size);
  let pos = 0;
  buf[pos++] = msg.channel === "swim" ? 0 : 1;
  pos = writeVarint(buf, pos, list.length);
  for (const a of list) {
    pos = writeAscii(buf, pos, a.id);
    pos = writeAscii(buf, pos, a.url);
  }
  buf.set(payload, pos);
  return buf;
}

/**
 * An address field (u8 length + ASCII) written at `pos`; the position after it. Ids and URLs are
 * checked ASCII and at most MAX_MESH_URL long before they are carried.
 */
function writeAscii(buf: Uint8Array, pos: number, s: string): number {
  buf[pos++] = s.length;
  for (let i = 0; i < s.length; i++) buf[pos++] = s.charCodeAt(i);
  return pos;
}

/** An address field as `writeAscii` wrote it. */
function readAscii(r: ByteReader): string {
  return String.fromCharCode(...r.take(r.byte(), "truncated"));
}

/**
 * `unknownKind`: refused at a kind marker this build does not know (the channel byte, a SWIM or gossip
 * type byte, a state's snapshot format version or kind), where a newer build's new message would be
 * refused; anything else malformed is not.
 */
export type MeshDecoded =
  | { ok: true; envelope: MeshEnvelope }
  | { ok: false; error: string; unknownKind: boolean };

/** A mesh body as it came off the wire, validated; or why it was refused. */
export function decodeMesh(bytes: Uint8Array, maxSnapshotBytes: number): MeshDecoded {
  const fail = (error: string, unknownKind = false): MeshDecoded => ({
    ok: false,
    error: `bad mesh message: ${error}`,
    unknownKind,
  });
  const r = new ByteReader(bytes, (why) => new RangeError(why));
  try {
    const channel = r.byte();
    if (channel > 1) return fail("unknown channel", true);
    const n = r.varint();
    if (n > MAX_MESH_ADDRS) return fail(`${n} addresses, at most ${MAX_MESH_ADDRS}`);
    const addrs: MeshAddress[] = [];
    for (let i = 0; i < n; i++) {
      const id = readAscii(r);
      const url = readAscii(r);
      if (!NODE_ID_PATTERN.test(id)) return fail("bad address id");
      if (!meshUrlOk(url)) return fail("bad address url");
      addrs.push({ id, url });
    }
    const payload = bytes.subarray(r.pos);
    const msg: MeshMessage =
      channel === 0
        ? { channel: "swim", msg: decodeSwim(payload, MESH_DECODE_LIMITS.maxEntries) }
        : {
            channel: "gossip",
            msg: decodeGossip(payload, { ...MESH_DECODE_LIMITS, maxSnapshotBytes }),
          };
    return { ok: true, envelope: { msg, addrs } };
  } catch (err) {
    const unknownKind =
      (err instanceof SwimDecodeError || err instanceof GossipDecodeError) && err.unknownKind;
    return fail((err as Error).message, unknownKind);
  }
}

/** The ids a mesh message names (whose addresses are worth carrying with it). */
export function meshMentions(msg: MeshMessage): NodeId[] {
  if (msg.channel === "gossip") return [];
  const m = msg.msg;
  switch (m.type) {
    case "ping":
    case "ack":
    case "gossip":
      return m.updates.filter((u) => u.status === "alive").map((u) => u.id);
    case "ping-req":
      return [m.target, ...m.updates.filter((u) => u.status === "alive").map((u) => u.id)];
    case "sync":
      return m.members.filter((u) => u.status === "alive" || u.status === "suspect").map((u) => u.id);
    default:
      return [];
  }
}
