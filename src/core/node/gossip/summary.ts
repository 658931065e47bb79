/**
 * Cache summaries, for content-based discovery under `maxEstimates`: a node holding a few owners'
 * estimates of many cannot tell which unheld member caches a prefix its traffic asks for, and random
 * discovery finds a rare prefix's few holders slowly. A member's summary is a set of checkpoint keys
 * of its tree (RadixTree.summaryKeys): for each distinct first block, the keys of blocks 1, 2, 4, …
 * of the unbranched path below it (a shared few-shot or system prompt), at most SUMMARY_MAX_KEYS,
 * named by a 16-bit content tag. A digest carries its sender's tag; a receiver holding another tag
 * (or none) asks for the summary, and the exchange runs both ways, so a summary moves only when it
 * changed and a node learns those of the members it meets in rounds, not of all N. The SummaryIndex
 * maps a checkpoint key to the members listing it: a request whose checkpoint key of block b is
 * listed by a member shares b whole blocks with that member's cache (gossip-anti-entropy.ts `seek`).
 * A summary is a hint: a stale or colliding one costs one discovery.
 *
 * Wire (type 5 of gossip/codec.ts): a flags byte (bit 0: want the receiver's summary; bit 1: a body
 * follows; other bits refused), the tag as a varint (≤ 0xffff), and with a body a varint count (≤
 * SUMMARY_MAX_KEYS) of 6-byte little-endian keys.
 */
import type { ByteReader } from "../../byte-reader.js";
import { invariant } from "../../invariant.js";
import { KEY_BYTES, readKey, writeKey } from "../../snapshot-codec.js";
import { varintSize, writeVarint } from "../../varint.js";
import type { GossipMessage } from "./config.js";
import type { HintsMessage } from "./hints.js";

/** A member's id (node/types.ts's NodeId). */
type NodeId = string;

/** Keys one summary lists at most: the decoder refuses more. */
export const SUMMARY_MAX_KEYS = 256;
/** Deepest checkpoint, in blocks (block 64: 1,024 tokens). */
export const SUMMARY_MAX_BLOCKS = 64;
/** Splits a 48-bit key into 32-bit halves for the tag hash. */
const TWO32 = 4294967296;
const FLAG_WANT = 1;
const FLAG_BODY = 2;

export interface SummaryMessage {
  type: "summary";
  /** The sender wants the receiver's summary (the receiver's tag differs from the one it holds). */
  want: boolean;
  /** The sender's own summary tag. */
  tag: number;
  /** The sender's summary, when sent (an answer to a want). */
  keys?: number[];
}

/** A gossip-channel message on the wire: Scuttlebutt's, a summary exchange, or relayed holder hints. */
export type MeshGossip = GossipMessage | SummaryMessage | HintsMessage;

/** A 16-bit tag of a key set, independent of order: equal sets, equal tags. */
export function summaryTag(keys: readonly number[]): number {
  let acc = keys.length;
  for (const k of keys) {
    const lo = k % TWO32;
    let h = Math.imul(lo ^ Math.imul((k - lo) / TWO32, 0x9e3779b1), 0x85ebca6b);
    h ^= h >>> 13;
    h = Math.imul(h, 0xc2b2ae35);
    acc = (acc + (h ^ (h >>> 16))) | 0;
  }
  return (acc ^ (acc >>> 16)) & 0xffff;
}

/** Bytes after the type byte. */
export function summarySize(m: SummaryMessage): number {
  return 1 + varintSize(m.tag) + (m.keys ? varintSize(m.keys.length) + KEY_BYTES * m.keys.length : 0);
}

/** Writes `m` after its type byte at `pos`; returns the position after it. */
export function writeSummary(buf: Uint8Array, pos: number, m: SummaryMessage): number {
  buf[pos++] = (m.want ? FLAG_WANT : 0) | (m.keys ? FLAG_BODY : 0);
  pos = writeVarint(buf, pos, m.tag);
  if (m.keys === undefined) return pos;
  pos = writeVarint(buf, pos, m.keys.length);
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  for (const k of m.keys) {
    writeKey(view, pos, k);
    pos += KEY_BYTES;
  }
  return pos;
}

/** Reads a summary after its type byte; `fail` makes the codec's error. Every count is bounded first. */
export function readSummary(r: ByteReader, fail: (why: string) => Error): SummaryMessage {
  const flags = r.byte();
  if ((flags & ~(FLAG_WANT | FLAG_BODY)) !== 0) throw fail("unknown summary flags");
  const tag = r.varint();
  if (tag > 0xffff) throw fail("bad summary tag");
  const want = (flags & FLAG_WANT) !== 0;
  if ((flags & FLAG_BODY) === 0) return { type: "summary", want, tag };
  const n = r.varint();
  if (n > SUMMARY_MAX_KEYS) throw fail(`${n} summary keys, at most ${SUMMARY_MAX_KEYS}`);
  const bytes = r.take(n * KEY_BYTES, "truncated summary");
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const keys: number[] = [];
  for (let i = 0; i < n; i++) keys.push(readKey(view, i * KEY_BYTES));
  return { type: "summary", want, tag, keys };
}

/** Our own summary, recomputed only when the tree's version moved. */
export class OwnSummary {
  private at = -1;
  private tree: unknown;
  keys: number[] = [];
  tag = summaryTag([]);

  refresh(tree: { version: number; summaryKeys(max: number, maxBlocks: number): number[] }): void {
    if (tree === this.tree && tree.version === this.at) return;
    this.tree = tree;
    this.at = tree.version;
    this.keys = tree.summaryKeys(SUMMARY_MAX_KEYS, SUMMARY_MAX_BLOCKS);
    this.tag = summaryTag(this.keys);
  }
}

/** A request's checkpoints, deepest first: [blocks, key of block `blocks`] for blocks 1, 2, 4, …. */
export function checkpoints(keys: readonly number[]): [number, number][] {
  const out: [number, number][] = [];
  for (let b = 1; b <= Math.min(keys.length, SUMMARY_MAX_BLOCKS); b *= 2)
    out.push([b, keys[b - 1] as number]);
  return out.reverse();
}

/**
 * Checkpoint key → members whose summary lists it, for at most `maxMembers` members (so at most
 * maxMembers × SUMMARY_MAX_KEYS entries); a member beyond that is not learnt until one goes.
 */
export class SummaryIndex {
  private readonly byMember = new Map<NodeId, { tag: number; keys: number[] }>();
  private readonly byKey = new Map<number, NodeId[]>();
  private entries = 0;

  constructor(private readonly maxMembers: number) {}

  get size(): number {
    return this.byMember.size;
  }

  /** Whether `member`'s summary at `tag` is worth asking for: not held at that tag, and room for it. */
  wants(member: NodeId, tag: number): boolean {
    const held = this.byMember.get(member);
    if (held !== undefined) return held.tag !== tag;
    return this.byMember.size < this.maxMembers;
  }

  set(member: NodeId, tag: number, keys: readonly number[]): void {
    invariant(keys.length <= SUMMARY_MAX_KEYS, "a summary over SUMMARY_MAX_KEYS reached the index");
    if (!this.byMember.has(member) && this.byMember.size >= this.maxMembers) return;
    this.remove(member);
    const own = [...new Set(keys)];
    this.byMember.set(member, { tag, keys: own });
    for (const k of own) {
      const list = this.byKey.get(k);
      if (list === undefined) this.byKey.set(k, [member]);
      else list.push(member);
    }
    this.entries += own.length;
  }

  remove(member: NodeId): void {
    const held = this.byMember.get(member);
    if (held === undefined) return;
    this.byMember.delete(member);
    for (const k of held.keys) {
      const list = this.byKey.get(k) as NodeId[];
      const i = list.indexOf(member);
      list[i] = list[list.length - 1] as NodeId;
      list.pop();
      if (list.length === 0) this.byKey.delete(k);
    }
    this.entries -= held.keys.length;
    invariant(this.entries >= 0 && this.byMember.size <= this.maxMembers, "summary index counts broke");
  }

  /** Members whose summary lists `key` (do not keep: it changes with the index). */
  holders(key: number): readonly NodeId[] {
    return this.byKey.get(key) ?? [];
  }

  clear(): void {
    this.byMember.clear();
    this.byKey.clear();
    this.entries = 0;
  }
}
