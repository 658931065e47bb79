/**
 * The Scuttlebutt messages' wire format, byte for byte what gossip/size.ts counts (so the simulator's
 * byte counts are the daemon's): a type byte (digests: 0, + 2 with its sender's load, + 4 with its
 * sender's summary tag; 3 states; 5 a cache summary, summary.ts; 7 holder hints, hints.ts; 1 = states with
 * whole snapshot frames, still decoded). A digest then has its room (a varint: how many new owners its sender
 * would take), with type & 2 the sender's queue depth and push-back ms (varints), with type & 4 the summary
 * tag (a varint), and its entries; states have a varint count of (varint length, compact frame, zigzag varint
 * block count) and then the wants. A compact frame is a snapshot-codec frame without the bytes every frame
 * repeats — magic, format version, block size — and without its CRC (the mesh request is authenticated
 * whole, TLS or HMAC, so the CRC guarded nothing more): kind, flags, then the frame from its sender on; the
 * decoder rebuilds the whole frame and the snapshot codec checks it as ever. An entry is the owner as a
 * length byte + ASCII, epoch and version as varints. Decoding bounds every count a peer controls and refuses
 * trailing bytes.
 */
import { BLOCK_SIZE } from "../../block-hash.js";
import { ByteReader } from "../../byte-reader.js";
import { crc32 } from "../../crc32.js";
import {
  decodeSnapshot,
  encodeSnapshot,
  SNAPSHOT_FORMAT_VERSION,
  SNAPSHOT_MAGIC,
  SnapshotDecodeError,
} from "../../snapshot-codec.js";
import { writeVarint } from "../../varint.js";
import { readHints, writeHints } from "./hints.js";
import type { DigestEntry, GossipMessage, OwnerState } from "./scuttlebutt.js";
import { COMPACT_DROPPED, gossipSize } from "./size.js";
import { type MeshGossip, readSummary, writeSummary } from "./summary.js";

const MAX_OWNER = 64;
/** Largest queue depth a digest may report (far above any node's admission bound). */
const MAX_QUEUE_DEPTH = 1_000_000;
const OWNER_CHARS = /^[A-Za-z0-9._-]+$/;
/** Type byte of a states message with compact frames (1: whole frames, the earlier form). */
const STATES = 3;
/** Type byte of a cache summary (summary.ts). */
const SUMMARY = 5;
/** Type byte of holder hints (hints.ts). */
const HINTS = 7;

/** The whole snapshot frame a compact one (`rec`: kind, flags, the frame from its sender on) stands for. */
function wholeFrame(rec: Uint8Array): Uint8Array {
  const n = rec.length + COMPACT_DROPPED;
  const frame = new Uint8Array(n);
  frame.set(SNAPSHOT_MAGIC, 0);
  frame[4] = SNAPSHOT_FORMAT_VERSION;
  frame[5] = rec[0] as number;
  frame[6] = BLOCK_SIZE;
  frame[7] = rec[1] as number;
  frame.set(rec.subarray(2), 8);
  new DataView(frame.buffer).setUint32(n - 4, crc32(frame, 0, n - 4), true);
  return frame;
}

export class GossipDecodeError extends Error {
  /**
   * A kind marker this build does not know: the message's type byte, or a state's snapshot format
   * version or kind. What a newer build's new form looks like (or garbage; only the sender's hello
   * tells them apart: server/runtime/mesh-peers.ts).
   */
  readonly unknownKind: boolean;
  constructor(message: string, unknownKind = false) {
    super(`bad gossip message: ${message}`);
    this.name = "GossipDecodeError";
    this.unknownKind = unknownKind;
  }
}

export interface GossipDecodeLimits {
  /** Most digest entries (a digest's, or a states message's wants). */
  maxEntries: number;
  /** Most states in one message. */
  maxStates: number;
  /** Largest snapshot frame inside a state. */
  maxSnapshotBytes: number;
}

export function encodeGossip(msg: MeshGossip): Uint8Array {
  const size = gossipSize(msg);
  const buf = new Uint8Array(size);
  let pos = 0;
  const entries = (es: readonly DigestEntry[]): void => {
    pos = writeVarint(buf, pos, es.length);
    for (const e of es) {
      buf[pos++] = e.owner.length;
      for (let i = 0; i < e.owner.length; i++) buf[pos++] = e.owner.charCodeAt(i);
      pos = writeVarint(buf, pos, e.epoch);
      pos = writeVarint(buf, pos, e.version);
    }
  };
  if (msg.type === "summary") {
    buf[pos++] = SUMMARY;
    pos = writeSummary(buf, pos, msg);
  } else if (msg.type === "hints") {
    buf[pos++] = HINTS;
    pos = writeHints(buf, pos, msg);
  } else if (msg.type === "digest") {
    buf[pos++] = (msg.load ? 2 : 0) | (msg.summary === undefined ? 0 : 4);
    pos = writeVarint(buf, pos, msg.room);
    if (msg.load) {
      pos = writeVarint(buf, pos, msg.load.queueDepth);
      pos = writeVarint(buf, pos, msg.load.pushBackMs);
    }
    if (msg.summary !== undefined) pos = writeVarint(buf, pos, msg.summary);
    entries(msg.entries);
  } else {
    buf[pos++] = STATES;
    pos = writeVarint(buf, pos, msg.states.length);
    for (const s of msg.states) {
      const frame = encodeSnapshot(s.snapshot);
      pos = writeVarint(buf, pos, frame.length - COMPACT_DROPPED);
      buf[pos++] = frame[5] as number;
      buf[pos++] = frame[7] as number;
      const rest = frame.subarray(8, frame.length - 4);
      buf.set(rest, pos);
      pos += rest.length;
      pos = writeVarint(buf, pos, s.blocks < 0 ? 1 : 2 * s.blocks);
    }
    entries(msg.wants);
  }
  if (pos !== size) throw new Error(`gossip codec: wrote ${pos} of ${size} bytes`);
  return buf;
}

/** Decodes one message; throws GossipDecodeError on anything malformed or over the limits. */
export function decodeGossip(bytes: Uint8Array, limits: GossipDecodeLimits): MeshGossip {
  const r = new ByteReader(bytes, (why) => new GossipDecodeError(why));
  const byte = () => r.byte();
  const varint = () => r.varint();
  const owner = (): string => {
    const len = byte();
    if (len < 1 || len > MAX_OWNER) throw new GossipDecodeError("bad owner");
    const id = String.fromCharCode(...r.take(len, "bad owner"));
    if (!OWNER_CHARS.test(id)) throw new GossipDecodeError("bad owner characters");
    return id;
  };
  const entries = (): DigestEntry[] => {
    const n = varint();
    if (n > limits.maxEntries) throw new GossipDecodeError(`${n} entries, at most ${limits.maxEntries}`);
    const out: DigestEntry[] = [];
    for (let i = 0; i < n; i++) out.push({ owner: owner(), epoch: varint(), version: varint() });
    return out;
  };
  let msg: MeshGossip;
  const type = byte();
  if (type === 0 || type === 2 || type === 4 || type === 6) {
    const room = varint();
    if (room > limits.maxEntries)
      throw new GossipDecodeError(`room for ${room} owners, at most ${limits.maxEntries}`);
    const digest: GossipMessage & { type: "digest" } = { type: "digest", room, entries: [] };
    if (type & 2) {
      const queueDepth = varint();
      const pushBackMs = varint();
      // The receiver clamps push-back to its own maxPushBackMs; the depth is bounded like a header's.
      if (queueDepth > MAX_QUEUE_DEPTH) throw new GossipDecodeError("bad queue depth");
      digest.load = { queueDepth, pushBackMs };
    }
    if (type & 4) {
      const summary = varint();
      if (summary > 0xffff) throw new GossipDecodeError("bad summary tag");
      digest.summary = summary;
    }
    digest.entries = entries();
    msg = digest;
  } else if (type === SUMMARY) {
    msg = readSummary(r, (why) => new GossipDecodeError(why));
  } else if (type === HINTS) {
    msg = readHints(r, owner, (why) => new GossipDecodeError(why));
  } else if (type === 1 || type === STATES) {
    const n = varint();
    if (n > limits.maxStates) throw new GossipDecodeError(`${n} states, at most ${limits.maxStates}`);
    const states: OwnerState[] = [];
    // A compact frame is bounded so that the whole frame it stands for is within the limit.
    const maxLen = type === STATES ? limits.maxSnapshotBytes - COMPACT_DROPPED : limits.maxSnapshotBytes;
    for (let i = 0; i < n; i++) {
      const len = varint();
      if (len > maxLen || (type === STATES && len < 2)) throw new GossipDecodeError("bad snapshot length");
      const taken = r.take(len, "bad snapshot length");
      const frame = type === STATES ? wholeFrame(taken) : taken;
      let snapshot: OwnerState["snapshot"];
      try {
        snapshot = decodeSnapshot(frame, { maxBytes: limits.maxSnapshotBytes });
      } catch (err) {
        const code = err instanceof SnapshotDecodeError ? err.code : undefined;
        throw new GossipDecodeError(
          (err as Error).message,
          code === "unsupported-version" || code === "bad-kind",
        );
      }
      const z = varint();
      if (z !== 1 && z % 2 !== 0) throw new GossipDecodeError("bad block count");
      states.push({ snapshot, blocks: z === 1 ? -1 : z / 2 });
    }
    msg = { type: "states", states, wants: entries() };
  } else throw new GossipDecodeError("unknown type", true);
  r.end();
  return msg;
}
