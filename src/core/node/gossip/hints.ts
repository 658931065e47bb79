/**
 * Holder hints, relayed: under `maxEstimates` a node meets the summaries (summary.ts) of only the members
 * that happened to gossip with it, so at hundreds of members it cannot name the holder of most prefixes.
 * Hints are the summaries turned inside out — checkpoint key → the member whose summary listed it last
 * — and relayed as rumors: a key new to a node is passed on once to `gossipFanout` members
 * (gossip-anti-entropy.ts), at most one relay per Δpoll / 16 (held news goes with the next hints
 * message or round; no timer flushes it), and a node's own summary's new keys with its next round, so
 * a key reaches every node in O(log N) hops, most of a network delay each, not of a round each. What a node
 * holds and sends grows with the distinct prefixes, not with N: a key known everywhere is news nowhere (a
 * later holder replaces the one named, first hand, without being relayed). A message is at most
 * HINTS_MAX_KEYS keys, newest first (the byte budget); the rest wait in a bounded queue, the oldest dropped.
 * A hint is a hint: a stale one costs one discovery (`seek` takes the member, its state shows).
 *
 * Wire (type 7 of gossip/codec.ts): a varint count of groups, each a holder (as a digest entry's
 * owner) and a varint count of 6-byte little-endian keys; at most HINTS_MAX_KEYS keys in all (so at
 * most that many groups, none empty).
 */
import type { ByteReader } from "../../byte-reader.js";
import { invariant } from "../../invariant.js";
import { KEY_BYTES, readKey, writeKey } from "../../snapshot-codec.js";
import { varintSize, writeVarint } from "../../varint.js";

/** A member's id (node/types.ts's NodeId). */
type NodeId = string;

/** Keys one hints message carries at most: the decoder refuses more. */
export const HINTS_MAX_KEYS = 32;
/** Holders kept per key (most recent first). */
export const HINT_HOLDERS = 1;
/** Keys held at most (the least recently learnt go first). */
export const HINT_KEYS = 4_096;
/** Rumors queued at most (the oldest dropped). */
const HINT_QUEUE = 1_024;
/** Pairs passed on remembered at most (the oldest forgotten first). */
export const HINT_RELAYED = 2 * HINT_KEYS;
const TWO32 = 4294967296;

export interface HintsMessage {
  type: "hints";
  groups: { holder: NodeId; keys: number[] }[];
}

/** Bytes after the type byte. */
export function hintsSize(m: HintsMessage): number {
  let n = varintSize(m.groups.length);
  for (const g of m.groups) n += 1 + g.holder.length + varintSize(g.keys.length) + KEY_BYTES * g.keys.length;
  return n;
}

/** Writes `m` after its type byte at `pos`; returns the position after it. */
export function writeHints(buf: Uint8Array, pos: number, m: HintsMessage): number {
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  pos = writeVarint(buf, pos, m.groups.length);
  for (const g of m.groups) {
    buf[pos++] = g.holder.length;
    for (let i = 0; i < g.holder.length; i++) buf[pos++] = g.holder.charCodeAt(i);
    pos = writeVarint(buf, pos, g.keys.length);
    for (const k of g.keys) {
      writeKey(view, pos, k);
      pos += KEY_BYTES;
    }
  }
  return pos;
}

/**
 * Reads hints after their type byte; `owner` reads and checks a member id (the codec's), `fail` makes
 * the codec's error. Every count is bounded before anything is allocated for it.
 */
export function readHints(r: ByteReader, owner: () => NodeId, fail: (why: string) => Error): HintsMessage {
  const n = r.varint();
  if (n > HINTS_MAX_KEYS) throw fail(`${n} hint groups, at most ${HINTS_MAX_KEYS}`);
  const groups: HintsMessage["groups"] = [];
  let total = 0;
  for (let i = 0; i < n; i++) {
    const holder = owner();
    const count = r.varint();
    if (count < 1 || count > HINTS_MAX_KEYS - total)
      throw fail(`hint group of ${count} keys, at most ${HINTS_MAX_KEYS} in all`);
    total += count;
    const bytes = r.take(count * KEY_BYTES, "truncated hints");
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const keys: number[] = [];
    for (let j = 0; j < count; j++) keys.push(readKey(view, j * KEY_BYTES));
    groups.push({ holder, keys });
  }
  return { type: "hints", groups };
}

interface Rumor {
  key: number;
  holder: NodeId;
}

/** Key → holders (HINT_HOLDERS, most recent first), and the pairs still to pass on. */
export class Hints {
  private readonly byKey = new Map<number, NodeId[]>();
  private readonly queue: Rumor[] = [];
  /**
   * Pairs we passed on, as hashes: a ring that outlives the index's LRU, so a key evicted here and
   * relayed back is not news again (else, past HINT_KEYS distinct keys, rumors would never die out).
   */
  private readonly relayed = new Set<number>();
  private readonly ring = new Float64Array(HINT_RELAYED);
  private ringAt = 0;
  private ringFilled = 0;
  /** Our own summary keys as last announced (a new key among them is a rumor with us as holder). */
  private announced = new Set<number>();

  constructor(private readonly selfId: NodeId) {}

  get keys(): number {
    return this.byKey.size;
  }

  /** Members hinted to hold `key`, most recent first (do not keep: it changes with the index). */
  holders(key: number): readonly NodeId[] {
    return this.byKey.get(key) ?? [];
  }

  /** `holder`'s summary listed `key` (first hand or relayed); a pair new here is passed on. */
  learn(key: number, holder: NodeId): void {
    if (holder === this.selfId) return;
    let list = this.byKey.get(key);
    if (list === undefined) {
      if (this.byKey.size >= HINT_KEYS) this.byKey.delete(this.byKey.keys().next().value as number);
      list = [];
    } else this.byKey.delete(key);
    // Re-inserted: the map's order is the keys' recency.
    this.byKey.set(key, list);
    const i = list.indexOf(holder);
    // News only while the key's list has room: a key held widely stops spreading once lists are full.
    const news = i < 0 && list.length < HINT_HOLDERS && this.firstRelay(key, holder);
    if (i >= 0) list.splice(i, 1);
    list.unshift(holder);
    if (list.length > HINT_HOLDERS) list.pop();
    if (news) this.rumor(key, holder);
  }

  /** Our own summary: its keys not announced before are passed on with us as holder. */
  announce(keys: readonly number[]): void {
    const next = new Set(keys);
    for (const k of next) if (!this.announced.has(k)) this.rumor(k, this.selfId);
    this.announced = next;
  }

  /** `holder`'s summary now lists just `keys`: hints naming it for any other key are stale. */
  retain(holder: NodeId, keys: readonly number[]): void {
    const listed = new Set(keys);
    this.drop(holder, (k) => !listed.has(k));
  }

  /** A member gone (or restarted, its cache empty): no longer named, nor passed on. */
  remove(holder: NodeId): void {
    this.drop(holder, () => true);
  }

  /** The next message: the newest HINTS_MAX_KEYS queued pairs, grouped by holder; undefined: none. */
  take(): HintsMessage | undefined {
    if (this.queue.length === 0) return undefined;
    const picked = this.queue.splice(Math.max(0, this.queue.length - HINTS_MAX_KEYS));
    const byHolder = new Map<NodeId, number[]>();
    for (const r of picked) {
      const keys = byHolder.get(r.holder);
      if (keys === undefined) byHolder.set(r.holder, [r.key]);
      else keys.push(r.key);
    }
    invariant(this.queue.length <= HINT_QUEUE, "hint queue over its bound");
    return { type: "hints", groups: [...byHolder].map(([holder, keys]) => ({ holder, keys })) };
  }

  private drop(holder: NodeId, stale: (key: number) => boolean): void {
    for (const [key, list] of this.byKey) {
      const i = list.indexOf(holder);
      if (i < 0 || !stale(key)) continue;
      list.splice(i, 1);
      // Its holder no longer holds it: should it again, that is news.
      this.relayed.delete(pairHash(key, holder));
      if (list.length === 0) this.byKey.delete(key);
    }
    let j = 0;
    for (const r of this.queue) if (r.holder !== holder || !stale(r.key)) this.queue[j++] = r;
    this.queue.length = j;
  }

  /** Whether `key`, `holder` is passed on here for the first time (within the ring's window). */
  private firstRelay(key: number, holder: NodeId): boolean {
    const h = pairHash(key, holder);
    if (this.relayed.has(h)) return false;
    if (this.ringFilled === HINT_RELAYED) this.relayed.delete(this.ring[this.ringAt] as number);
    else this.ringFilled++;
    this.ring[this.ringAt] = h;
    this.ringAt = (this.ringAt + 1) % HINT_RELAYED;
    this.relayed.add(h);
    return true;
  }

  private rumor(key: number, holder: NodeId): void {
    if (this.queue.length >= HINT_QUEUE) this.queue.shift();
    this.queue.push({ key, holder });
  }
}

/** A 48-bit key with its holder's FNV-1a hash folded into its low 32 bits (a collision: one relay missed). */
function pairHash(key: number, holder: NodeId): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < holder.length; i++) h = Math.imul(h ^ holder.charCodeAt(i), 0x01000193);
  const lo = key % TWO32;
  return key - lo + ((lo ^ h) >>> 0);
}
