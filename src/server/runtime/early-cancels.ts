/**
 * Cancels that overtook their forward (peer-traffic.ts): the channel transport hands a resumed peer's
 * cancel over before its forward, and HTTP may reorder concurrent requests. The core drops such a
 * forward on arrival (serving.ts `cancelAhead`), but one in another model's tokens is tokenized here
 * first, holding a `--max-peer-tokenizing` place for nobody; a cancel kept here lets it be answered at
 * once. Keyed as the core keys a cancel: one peer's one attempt of one request, that attempt only.
 * A peer sends as many cancels as it likes, so the record is bounded in count, per peer and in all,
 * and in time; a cancel forgotten early only costs its forward the tokenize it would have had anyway.
 */
import { streamKey } from "./served-forwards.js";

/** Far beyond a reordering of messages sent together; a forward later than this has timed out. */
export const EARLY_CANCEL_TTL_MS = 30_000;
/** Cancels kept in all, and of one peer (a peer's flood pushes out at most that many of the others'). */
export const EARLY_CANCELS_MAX = 4_096;
export const EARLY_CANCELS_MAX_PER_PEER = 1_024;

export interface EarlyCancelsOptions {
  now: () => number;
  ttlMs?: number;
  max?: number;
  maxPerPeer?: number;
}

export class EarlyCancels {
  /** By key, oldest first: when each was noted, and whose. */
  private readonly all = new Map<string, { peer: string; at: number }>();
  /** Each peer's keys, oldest first. */
  private readonly byPeer = new Map<string, Set<string>>();
  private readonly ttlMs: number;
  private readonly max: number;
  private readonly maxPerPeer: number;

  constructor(private readonly o: EarlyCancelsOptions) {
    this.ttlMs = o.ttlMs ?? EARLY_CANCEL_TTL_MS;
    this.max = o.max ?? EARLY_CANCELS_MAX;
    this.maxPerPeer = o.maxPerPeer ?? EARLY_CANCELS_MAX_PER_PEER;
  }

  /** Cancels kept now. */
  get size(): number {
    return this.all.size;
  }

  /** `peer` cancelled `attempt` of `reqId` before its forward came: kept (noted again: renewed). */
  note(peer: string, reqId: string, attempt: number): void {
    const now = this.o.now();
    this.expire(now);
    const key = streamKey(peer, reqId, attempt);
    this.forget(key);
    const own = this.byPeer.get(peer);
    if (own !== undefined && own.size >= this.maxPerPeer) this.forget(own.values().next().value as string);
    if (this.all.size >= this.max) this.forget(this.all.keys().next().value as string);
    // Got after the evictions, which drop a set they empty.
    let keys = this.byPeer.get(peer);
    if (keys === undefined) {
      keys = new Set();
      this.byPeer.set(peer, keys);
    }
    this.all.set(key, { peer, at: now });
    keys.add(key);
  }

  /**
   * Whether `peer` cancelled `attempt` of `reqId` within the TTL. Kept after a match, as the core keeps
   * its cancel's key: a copy of the forward sent again is answered cancelled too (and counted again),
   * where the core would say it was handled — retryable either way, its origin has moved on.
   */
  has(peer: string, reqId: string, attempt: number): boolean {
    this.expire(this.o.now());
    return this.all.has(streamKey(peer, reqId, attempt));
  }

  /** Forgets the cancels past the TTL: the oldest first, so only they are looked at. */
  private expire(now: number): void {
    for (const [key, { at }] of this.all) {
      if (now - at < this.ttlMs) return;
      this.forget(key);
    }
  }

  private forget(key: string): void {
    const entry = this.all.get(key);
    if (entry === undefined) return;
    this.all.delete(key);
    const keys = this.byPeer.get(entry.peer);
    keys?.delete(key);
    if (keys?.size === 0) this.byPeer.delete(entry.peer);
  }
}
