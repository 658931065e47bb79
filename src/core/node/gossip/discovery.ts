/**
 * Content discovery for the gossip role (owned by one GossipAntiEntropy, ../gossip-anti-entropy.ts),
 * once it holds some owners of many: the summaries of members we met (summary.ts), holder hints
 * relayed as rumors (hints.ts, paced per sender by hint-limit.ts), and the `seek` a request makes
 * when a summary or hint names a member caching a longer prefix than any owner held. Apart from the
 * Scuttlebutt rounds since none of it carries estimates: it only says which member to take next.
 */
import { BLOCK_SIZE, blockKeys } from "../../block-hash.js";
import type { EngineRequest } from "../../engine.js";
import { keyTokens } from "../../namespace.js";
import type { PeerIndex } from "../../peer-index.js";
import type { NodeConfig } from "../config.js";
import type { NodeId } from "../types.js";
import { HintLimit } from "./hint-limit.js";
import { Hints, type HintsMessage } from "./hints.js";
import { pickDistinct } from "./states.js";
import {
  checkpoints,
  type MeshGossip,
  type OwnSummary,
  SUMMARY_MAX_BLOCKS,
  SummaryIndex,
  type SummaryMessage,
} from "./summary.js";

/** Members' cache summaries held at most (each ≤ SUMMARY_MAX_KEYS keys). */
const MAX_SUMMARIES = 1_024;

/** What discovery reads of its owner's state. */
export interface DiscoveryHost {
  /** Whether `id` is a member now. */
  member(id: NodeId): boolean;
  /** Whether we hold an estimate of `id`. */
  holds(id: NodeId): boolean;
  /** Whether summaries are swapped at all: more members than owners we hold. */
  swapping(): boolean;
  random(): number;
}

/** A message to one member (the owner adds our load to digests). */
export type Send = (to: NodeId, msg: MeshGossip) => void;

export class Discovery {
  private readonly summaries = new SummaryIndex(MAX_SUMMARIES);
  private readonly hints: Hints;
  /** Hints messages each sender may send. */
  private readonly hintLimit: HintLimit;
  private seekAt = Number.NEGATIVE_INFINITY;

  constructor(
    selfId: NodeId,
    private readonly config: NodeConfig,
    private readonly host: DiscoveryHost,
    /** Ours, kept by the owner across its resets (a restart keeps its tree's summary until it changes). */
    private readonly ownSummary: OwnSummary,
    /** When we last relayed hints: given by the owner, as the relay pace outlives a reset. */
    public hintsAt: number,
  ) {
    this.hints = new Hints(selfId);
    this.hintLimit = new HintLimit(16 + config.gossipRoundsPerPoll, config.pollMs);
  }

  /** Holder hints held, and hints messages refused by the per-sender bound. */
  get stats(): { keys: number; dropped: number } {
    return { keys: this.hints.keys, dropped: this.hintLimit.dropped };
  }

  /** A member gone: its summary, the hints naming it and its hints budget. */
  remove(id: NodeId): void {
    this.summaries.remove(id);
    this.hints.remove(id);
    this.hintLimit.remove(id);
  }

  /** A member restarted: its cache is empty, so every hint naming it is stale. */
  restarted(id: NodeId): void {
    this.hints.remove(id);
  }

  /**
   * Queued hints (hints.ts; with `announce`, our own summary's new keys too) in one message to
   * `gossipFanout` live members: only where summaries are swapped at all (more members than we hold).
   */
  passHints(live: readonly NodeId[], announce: boolean, now: number, send: Send): void {
    if (!this.host.swapping() || live.length === 0) return;
    // At most one relay per Δpoll / 16 (news held meanwhile shares a later message): a message a hint
    // was dearer in requests.
    if (!announce && now - this.hintsAt < this.config.pollMs / 16) return;
    if (announce) this.hints.announce(this.ownSummary.keys);
    const msg = this.hints.take();
    if (msg === undefined) return;
    this.hintsAt = now;
    for (const t of pickDistinct(live, this.config.gossipFanout, () => this.host.random())) send(t, msg);
  }

  /** A hints message from member `from`, within its budget: learnt, and news passed on. */
  onHints(from: NodeId, msg: HintsMessage, now: number, live: readonly NodeId[], send: Send): void {
    if (!this.hintLimit.allow(from, now)) return;
    // What is news here goes on now if no relay left in the last Δpoll / 16, else with the next
    // hints message or round (no timer flushes it): a hop mostly costs a network delay, not a round.
    for (const g of msg.groups)
      if (this.host.member(g.holder)) for (const k of g.keys) this.hints.learn(k, g.holder);
    this.passHints(live, false, now, send);
  }

  /**
   * A digest's summary tag: a summary we lack (or hold at another tag) of a member we hold no
   * estimate of (an estimate says more) is asked for, with our tag (the exchange runs both ways).
   */
  onDigestTag(from: NodeId, tag: number, send: Send): void {
    if (this.host.swapping() && !this.host.holds(from) && this.summaries.wants(from, tag))
      send(from, { type: "summary", want: true, tag: this.ownSummary.tag });
  }

  /**
   * A summary exchange: a body is learnt; a want is answered with ours, asking for theirs in turn only
   * when the want came without a body (so an exchange ends after at most three messages).
   */
  onSummary(from: NodeId, msg: SummaryMessage, send: Send): void {
    const idx = this.summaries;
    if (msg.keys !== undefined) {
      idx.set(from, msg.tag, msg.keys);
      // What its summary no longer lists it no longer holds (evicted): hints saying so are stale.
      this.hints.retain(from, msg.keys);
      for (const k of msg.keys) this.hints.learn(k, from);
    }
    if (!msg.want) return;
    const own = this.ownSummary;
    const want = msg.keys === undefined && idx.wants(from, msg.tag);
    send(from, { type: "summary", want, tag: own.tag, keys: own.keys });
  }

  /**
   * The member to seek for a request about to be routed, and the seed its estimate starts from: one
   * whose summary or a hint shows it caches a longer prefix of the request than we (`selfMatch`) and
   * every owner held in `index` do, by at least one checkpoint; the prefix it proves is the seed. At
   * most one per Δpoll / 8, counted when one is found whatever the seek then makes of it (this is
   * the routing path).
   */
  find(
    request: EngineRequest,
    selfMatch: number,
    now: number,
    index: PeerIndex,
  ): { owner: NodeId; seed: Float64Array } | undefined {
    const idx = this.summaries;
    const hints = this.hints;
    if (now - this.seekAt < this.config.pollMs / 8) return undefined;
    if (idx.size === 0 && hints.keys === 0) return undefined;
    const tokens = keyTokens(request);
    const keys = blockKeys(tokens, Math.min(tokens.length, SUMMARY_MAX_BLOCKS * BLOCK_SIZE));
    let best = selfMatch;
    const m = index.matchAll(tokens);
    for (let i = 0; i < m.owners.length; i++) best = Math.max(best, m.lengths[i] as number);
    const host = this.host;
    const fit: NodeId[] = [];
    for (const [blocks, key] of checkpoints(keys)) {
      if (blocks * BLOCK_SIZE <= best) return undefined;
      for (const h of idx.holders(key)) if (host.member(h) && !host.holds(h)) fit.push(h);
      for (const h of hints.holders(key))
        if (host.member(h) && !host.holds(h) && !fit.includes(h)) fit.push(h);
      if (fit.length === 0) continue;
      const owner = fit[Math.floor(this.host.random() * fit.length)] as NodeId;
      this.seekAt = now;
      return { owner, seed: Float64Array.from(keys.slice(0, blocks)) };
    }
    return undefined;
  }
}
