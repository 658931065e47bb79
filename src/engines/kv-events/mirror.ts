/**
 * An exact mirror of an engine's prefix cache, built from its KV events alone.
 *
 * What the engine holds, as the events say it: blocks, each a hash, the hash of the block before it
 * (its parent) and its tokens. A block is matchable as a prefix only while every block before it back
 * to the sequence's start is held too, exactly as the engines look prefixes up (vLLM walks the hash
 * chain block by block and stops at the first miss; SGLang walks its radix tree). Blocks are removed
 * one by one: a block whose parent is gone stays held, but unreachable, until it is removed itself or
 * its parent is stored again (same tokens, same parent: same hash), which makes it reachable again.
 *
 * Copies: vLLM does not deduplicate physical blocks, so one hash may be stored (and removed) several
 * times; a hash is held while its copy count is above zero. Newer vLLM says how many copies remain
 * after each removal, which then wins over the count.
 *
 * Scope: the GPU medium (blocks offloaded to other media are counted, not mirrored: a prompt cannot
 * hit them without a reload the engine does not report), the KV-cache group `group` (hybrid models
 * have several and publish each). Namespaces: a chain whose first block names a LoRA adapter and/or
 * a cache salt (`BlockStored.namespace`) hangs under that namespace's own root, and `sequences`
 * reports it as `keyTokens` of its namespace, the key the node's tree gives such a request: it
 * matches only requests of the same namespace, as in the engine. Blocks keyed by inputs the node
 * cannot name (multimodal inputs, unknown extensions) are held (so their removals match) but never
 * matched.
 *
 * One mirror per publisher: a data-parallel rank publishes its own stream (port + rank); batches of
 * another rank are counted and refused (docs/engines-kv-events.md: one node per rank), and degrade
 * the mirror: the stream is another rank's, so this rank's blocks never come. A batch naming no
 * rank belongs to the stream it came on.
 *
 * `degraded` says the mirror may lack blocks (events were lost, or an event contradicted it); it then
 * keeps applying events ("rebuilds from events from then on") and only AllBlocksCleared, or a full
 * history from sequence 0, makes it exact again (`clear`). Batches lost for good (`forget`) may have
 * removed any block held, or come from a new engine whose cache started empty (the stream cannot
 * tell which): the blocks held before them are dropped, as no longer known to be held, and only
 * those stored since are kept.
 */
import type { Tokens } from "../../core/engine.js";
import { type NamespaceFields, namespaceOf } from "../../core/namespace.js";
import { type Block, BlockIndex, isNsRoot, keyOf, nsRoot, ROOT, sameTokens } from "./block-index.js";
import type { BlockHash, BlockRemoved, BlockStored, KvEventBatch } from "./wire-types.js";

export interface MirrorOptions {
  /** Data-parallel rank this mirror follows (a batch without a rank counts as rank 0). */
  rank?: number;
  /** KV-cache group followed (null or this group index in the events). */
  group?: number;
  /** Most blocks held (all namespaces); beyond: degraded, and further stores are dropped. */
  maxBlocks?: number;
  /**
   * Parent hashes that mean "the start of a sequence", beside null. Older SGLang sends the hash of its
   * radix root's empty key (CPython's hash of the empty tuple, a constant) as the first block's parent.
   */
  rootHashes?: BlockHash[];
}

export const OLD_SGLANG_ROOT_HASH: BlockHash = "i:5740354900026072187";

export interface MirrorCounters {
  batches: number;
  events: number;
  stored: number;
  removed: number;
  cleared: number;
  /** Events for another medium, another KV-cache group, and batches of another rank (ignored). */
  otherMedium: number;
  otherGroup: number;
  otherRank: number;
  /** Stores of a held hash with other tokens or another parent (inconsistent: degrades). */
  conflicts: number;
  /** Removals of a hash not held (expected while degraded; otherwise inconsistent: degrades). */
  unknownRemovals: number;
  /** Stores whose token count does not split into the hashes given (refused: degrades). */
  malformed: number;
  /** Blocks dropped because batches after them were lost for good (`forget`). */
  forgotten: number;
}

/**
 * A change of the mirror's standing, for a log line: it became degraded, or forgot blocks (and, if it
 * was exact until then, became degraded by it: `degraded`).
 */
export type MirrorTransition =
  | { kind: "degraded"; reason: string }
  | { kind: "forgot"; reason: string; blocks: number; degraded: boolean };

export interface MirrorStats {
  degraded: string | undefined;
  degradedSince: number | undefined;
  blocks: number;
  /** Blocks matchable by a prompt (of any namespace), and their tokens. */
  reachableBlocks: number;
  reachableTokens: number;
  /** Last block size seen on the GPU medium (undefined before the first store). */
  blockSize: number | undefined;
  version: number;
  counters: MirrorCounters;
}

export class KvCacheMirror {
  private readonly blocks = new Map<BlockHash, Block>();
  /** The blocks a prompt can reach (the plain ones, linked under their parents). */
  private readonly index = new BlockIndex();
  private readonly rootHashes: Set<BlockHash>;
  private readonly rank: number;
  private readonly group: number;
  private readonly maxBlocks: number;
  private ver = 0;
  private degradedReason: string | undefined;
  private degradedAt: number | undefined;
  private lastBlockSize: number | undefined;
  private readonly listeners = new Set<() => void>();
  private readonly transitions = new Set<(t: MirrorTransition) => void>();
  readonly counters: MirrorCounters = {
    batches: 0,
    events: 0,
    stored: 0,
    removed: 0,
    cleared: 0,
    otherMedium: 0,
    otherGroup: 0,
    otherRank: 0,
    conflicts: 0,
    unknownRemovals: 0,
    malformed: 0,
    forgotten: 0,
  };

  constructor(
    opts: MirrorOptions = {},
    private readonly now: () => number = Date.now,
  ) {
    this.rank = opts.rank ?? 0;
    this.group = opts.group ?? 0;
    this.maxBlocks = opts.maxBlocks ?? 1 << 20;
    this.rootHashes = new Set(opts.rootHashes ?? [OLD_SGLANG_ROOT_HASH]);
  }

  /** +1 on every change of what a prompt can match. */
  get version(): number {
    return this.ver;
  }

  get degraded(): string | undefined {
    return this.degradedReason;
  }

  get blockSize(): number | undefined {
    return this.lastBlockSize;
  }

  /** Called after each change (batch applied, cleared, degraded). */
  onChange(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** Called when the mirror becomes degraded or forgets blocks (before the change listeners). */
  onTransition(fn: (t: MirrorTransition) => void): () => void {
    this.transitions.add(fn);
    return () => this.transitions.delete(fn);
  }

  /** Applies one batch in order; returns false (and mirrors nothing of it) for another rank's batch. */
  apply(batch: KvEventBatch): boolean {
    // A batch naming no rank is the stream's own: SGLang releases that offset each attention-DP
    // rank's ports leave the rank out of the batch, so only a rank the batch names can differ.
    const rank = batch.dataParallelRank;
    if (rank !== null && rank !== this.rank) {
      this.counters.otherRank++;
      this.markDegraded(
        `a batch of data-parallel rank ${rank} came on the stream followed for rank ${this.rank}: ` +
          "rank r publishes on the engine's configured ports + r",
      );
      return false;
    }
    this.counters.batches++;
    for (const ev of batch.events) {
      this.counters.events++;
      if (ev.type === "BlockStored") this.store(ev);
      else if (ev.type === "BlockRemoved") this.remove(ev);
      else this.reset(true);
    }
    this.notify();
    return true;
  }

  /** Drops every block; exact again (the engine's cache is known empty). */
  clear(): void {
    this.reset(false);
    this.notify();
  }

  /**
   * Batches were lost for good (`reason`): drops every block held and marks the mirror degraded. The
   * lost batches may have removed any of them, or belonged to a new engine (restarted, its cache
   * empty) whose numbering hid the restart; either way none is known to be held any more, and no
   * removal of them may ever come. Blocks stored from here on are certain again.
   */
  forget(reason: string): void {
    const blocks = this.blocks.size;
    this.counters.forgotten += blocks;
    this.blocks.clear();
    this.index.clear();
    this.ver++;
    const degraded = this.degrade(reason);
    this.emit({ kind: "forgot", reason, blocks, degraded });
    this.notify();
  }

  /** Marks the mirror as possibly missing blocks (the first reason is kept until exact again). */
  markDegraded(reason: string): void {
    if (!this.degrade(reason)) return;
    this.emit({ kind: "degraded", reason });
    this.notify();
  }

  /** True when this made the mirror degraded (it was not). */
  private degrade(reason: string): boolean {
    if (this.degradedReason !== undefined) return false;
    this.degradedReason = reason;
    this.degradedAt = this.now();
    this.ver++;
    return true;
  }

  private emit(t: MirrorTransition): void {
    for (const fn of this.transitions) fn(t);
  }

  /** Longest prefix of `tokens` (of namespace `ns`) the engine holds as a chain of whole blocks, in tokens. */
  match(tokens: Tokens, ns: NamespaceFields = {}): number {
    return this.index.match(tokens, ns);
  }

  /**
   * Every cached prefix a prompt can match, one sequence per reachable leaf: plain tokens for the
   * default namespace, `keyTokens` of the namespace for the others.
   */
  sequences(): Tokens[] {
    return this.index.sequences();
  }

  stats(): MirrorStats {
    const reachable = this.index.reachable();
    // Cheap invariant of the kept counts: only held blocks are reachable.
    if (reachable.blocks > this.blocks.size) throw new Error("mirror: more blocks reachable than held");
    return {
      degraded: this.degradedReason,
      degradedSince: this.degradedAt,
      blocks: this.blocks.size,
      reachableBlocks: reachable.blocks,
      reachableTokens: reachable.tokens,
      blockSize: this.lastBlockSize,
      version: this.ver,
      counters: { ...this.counters },
    };
  }

  private store(ev: BlockStored): void {
    if (!this.followed(ev.medium, ev.group)) return;
    const n = ev.hashes.length;
    if (ev.tokens.length % n !== 0 || ev.tokens.length === 0) {
      this.counters.malformed++;
      this.markDegraded(`a BlockStored carried ${ev.tokens.length} tokens for ${n} blocks`);
      return;
    }
    const per = ev.tokens.length / n;
    this.lastBlockSize = per;
    let parent = this.parentKey(ev.parent, ev.namespace);
    // Both engines name as parent a block they hold (vLLM: the request's previous block, which it
    // holds; SGLang: the radix node above): one unknown here was missed. The chain stays held (its
    // removals match) but unreachable until that parent is stored: the engine reuses it only through it.
    // Not so in vLLM's sliding-window or Mamba groups, which drop the blocks behind (partialGroup).
    if (ev.parent !== null && parent === ev.parent && !ev.partialGroup && !this.blocks.has(parent))
      this.markDegraded(`block ${ev.hashes[0]} was stored under block ${parent}, never stored`);
    for (let i = 0; i < n; i++) {
      const hash = ev.hashes[i]!;
      const tokens = ev.tokens.slice(i * per, (i + 1) * per);
      this.counters.stored++;
      const plain = !ev.namespaced && !ev.blockNamespaced?.[i];
      const held = this.blocks.get(hash);
      if (held) {
        if (held.parent !== parent || held.plain !== plain || !sameTokens(held.tokens, tokens)) {
          this.counters.conflicts++;
          this.markDegraded(`block ${hash} was stored again with other contents`);
        }
        held.copies++;
      } else if (this.blocks.size >= this.maxBlocks) {
        this.markDegraded(`more than ${this.maxBlocks} blocks: the mirror stopped storing`);
      } else {
        const key = keyOf(tokens, 0, tokens.length);
        const block: Block = { hash, parent, tokens, key, copies: 1, plain };
        if (isNsRoot(parent) && ev.namespace) block.ns = { ...ev.namespace };
        this.blocks.set(hash, block);
        if (block.plain) this.link(block);
      }
      parent = hash;
    }
  }

  private remove(ev: BlockRemoved): void {
    if (!this.followed(ev.medium, ev.group)) return;
    for (let i = 0; i < ev.hashes.length; i++) {
      const hash = ev.hashes[i]!;
      this.counters.removed++;
      const held = this.blocks.get(hash);
      if (!held) {
        this.counters.unknownRemovals++;
        this.markDegraded(`block ${hash} was removed but never stored`);
        continue;
      }
      held.copies = ev.remainingCopies ? ev.remainingCopies[i]! : held.copies - 1;
      if (held.copies > 0) continue;
      this.blocks.delete(hash);
      if (held.plain) this.unlink(held);
    }
  }

  private reset(fromEvent: boolean): void {
    if (fromEvent) this.counters.cleared++;
    this.blocks.clear();
    this.index.clear();
    this.degradedReason = undefined;
    this.degradedAt = undefined;
    this.ver++;
  }

  private followed(medium: string | null, group: number | null): boolean {
    if (medium !== null && medium !== "GPU") {
      this.counters.otherMedium++;
      return false;
    }
    if ((group ?? this.group) !== this.group) {
      this.counters.otherGroup++;
      return false;
    }
    return true;
  }

  private parentKey(parent: BlockHash | null, ns: NamespaceFields | undefined): string {
    if (parent !== null && !this.rootHashes.has(parent)) return parent;
    const name = ns ? namespaceOf(ns) : undefined;
    if (name === undefined) return ROOT;
    return nsRoot(name);
  }

  private link(b: Block): void {
    this.index.link(b);
    this.ver++;
  }

  private unlink(b: Block): void {
    this.index.unlink(b);
    this.ver++;
  }

  private notify(): void {
    for (const fn of this.listeners) fn();
  }
}
