/**
 * The prompts queued here or forwarded by us lately, by block key → the node that last got one
 * (`recentPrefixMs`). A tree takes a prompt, and a peer's estimate of it, only once its run is done
 * (and the next snapshot has come), so under load a second request for a prefix still queued sees no
 * holder and may be sent cold somewhere else: the prefix computed twice, the cold start's backlog made
 * longer. Counting what went to a node lately as its match routes that request after the first,
 * unless that node's wait costs more than computing the prefix elsewhere (the policy prices both).
 * Local knowledge only: nothing goes on the wire, so nodes with it and without it interoperate.
 */
import { BLOCK_SIZE, BlockHasher } from "../block-hash.js";
import type { Tokens } from "../engine.js";
import type { NodeId } from "./types.js";

/** Most block keys remembered (the oldest forgotten first): a bound on memory, whatever clients send. */
export const MAX_RECENT_KEYS = 1 << 16;

interface Recent {
  to: NodeId;
  at: number;
}

export class RecentPrefixes {
  private readonly byKey = new Map<number, Recent>();
  private readonly hasher = new BlockHasher();
  private readonly matches = new Map<NodeId, number>();

  constructor(
    /** How long a prompt counts as its node's match (a later one of the prefix renews it). */
    private readonly windowMs: number,
    private readonly maxKeys = MAX_RECENT_KEYS,
  ) {}

  get size(): number {
    return this.byKey.size;
  }

  clear(): void {
    this.byKey.clear();
  }

  /** `tokens` (a request's cache keys) went to `to` at `now`: every full block of it is `to`'s. */
  record(to: NodeId, tokens: Tokens, now: number): void {
    const n = Math.floor(tokens.length / BLOCK_SIZE);
    this.hasher.reset();
    for (let b = 0; b < n; b++) {
      const key = this.hasher.next(tokens, b * BLOCK_SIZE);
      this.byKey.delete(key); // re-inserted last: the map's order is the order of forgetting
      this.byKey.set(key, { to, at: now });
    }
    while (this.byKey.size > this.maxKeys) this.byKey.delete(this.byKey.keys().next().value as number);
  }

  /**
   * Per node, the tokens of `tokens` that went to it within the window: the deepest block along the
   * chain whose last one went there (the chain ends at the first block unknown or expired). Reused by
   * the next call: copy to keep.
   */
  match(tokens: Tokens, now: number): ReadonlyMap<NodeId, number> {
    this.matches.clear();
    const n = Math.floor(tokens.length / BLOCK_SIZE);
    this.hasher.reset();
    for (let b = 0; b < n; b++) {
      const s = this.byKey.get(this.hasher.next(tokens, b * BLOCK_SIZE));
      if (s === undefined || now - s.at > this.windowMs) break;
      this.matches.set(s.to, (b + 1) * BLOCK_SIZE);
    }
    return this.matches;
  }

  /** A peer gone (departed, restarted): what went to it is no match any more. */
  forget(to: NodeId): void {
    for (const [k, s] of this.byKey) if (s.to === to) this.byKey.delete(k);
  }
}
