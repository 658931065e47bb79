/**
 * The remote engine's cache model when the server publishes KV events (vLLM, SGLang): the node's tree
 * becomes the server's cache exactly, as the mirror holds it, and falls back to an LRU model of
 * `capacityTokens` (the engine's model without events) while the mirror is not exact.
 *
 * The engine is then engine-managed: after each run it reports `cachedSequences`, which the node
 * mirrors (`tree.resetTo`). Exact: the mirror's sequences. Not exact (history unknown, or degraded):
 * the mirror's sequences (blocks it knows the server holds) plus the LRU model's (its guess at the
 * rest). Blocks the mirror held before batches lost for good are not among the known: the lost batches
 * may be a restarted server's, whose cache started empty, and no removal of the old blocks would ever
 * come to stop peers being sent here for them; the mirror forgets them, and this node's own runs among
 * them stay only as the LRU guess, which ages them out.
 *
 * Prediction accuracy: before a run the mirror predicts what the server will report as cached (its
 * match, within the engine's rules); after it, the server's report is compared. Only exact
 * predictions count; reports that came while degraded are counted apart.
 */
import type { Tokens } from "../../core/engine.js";
import { keyTokens, type NamespaceFields } from "../../core/namespace.js";
import { RadixTree } from "../../core/radix-tree.js";
import { KvCacheMirror, type MirrorStats } from "./mirror.js";
import { type KvEventsConfig, type KvEventsOptions, KvEventsOptionsSchema } from "./options.js";
import { KvEventsSubscriber, type KvSubscriberStatus } from "./subscriber.js";
import { type KvEventsLog, KvTransitionLog } from "./transition-log.js";

export interface KvMirrorAccuracy {
  /** Runs the mirror predicted (exact) and the server reported cached tokens for. */
  requests: number;
  /** Of those, how many the prediction equalled the report. */
  exact: number;
  predictedTokens: number;
  reportedTokens: number;
  /** Σ |predicted − reported|. */
  absErrorTokens: number;
  /** Reports that came while the mirror was not exact (no prediction made). */
  unpredicted: number;
}

export interface KvEventsStatus {
  /** The mirror holds exactly what the server holds (history known, nothing lost since). */
  exact: boolean;
  /** Why not, when not. */
  degraded: string | undefined;
  subscriber: KvSubscriberStatus;
  mirror: MirrorStats;
  accuracy: KvMirrorAccuracy;
}

export class KvEventsCacheModel {
  readonly mirror: KvCacheMirror;
  private readonly subscriber: KvEventsSubscriber;
  private readonly opts: KvEventsConfig;
  /** The LRU model used while not exact: what the node would have assumed without events. */
  private readonly fallback: RadixTree;
  private tick = 0;
  private closed = false;
  /** Ends each settle wait under way: on close, as the events it waits for can no longer come. */
  private readonly settling = new Set<() => void>();
  private readonly transitions: KvTransitionLog | undefined;
  private readonly acc: KvMirrorAccuracy = {
    requests: 0,
    exact: 0,
    predictedTokens: 0,
    reportedTokens: 0,
    absErrorTokens: 0,
    unpredicted: 0,
  };

  /** `log`: one line when the mirror becomes degraded, forgets blocks, or is exact again (bounded). */
  constructor(options: KvEventsOptions, capacityTokens: number, log?: KvEventsLog) {
    this.opts = KvEventsOptionsSchema.parse(options);
    this.mirror = new KvCacheMirror({
      rank: this.opts.rank,
      group: this.opts.group,
      maxBlocks: this.opts.maxBlocks,
    });
    this.subscriber = new KvEventsSubscriber(this.mirror, {
      endpoint: this.opts.endpoint,
      replayEndpoint: this.opts.replayEndpoint,
      topic: this.opts.topic,
      replayTimeoutMs: this.opts.replayTimeoutMs,
      probeIntervalMs: this.opts.probeIntervalMs,
      maxQueuedBatches: this.opts.maxQueuedBatches,
      maxQueuedBytes: this.opts.maxQueuedBytes,
      limits: { maxPayloadBytes: this.opts.maxPayloadBytes },
    });
    this.fallback = new RadixTree({ capacity: capacityTokens }, false);
    if (log) {
      const t = new KvTransitionLog(log, () => ({
        exact: this.exact,
        degraded: this.degradedReason(),
        restarts: this.subscriber.status().restarts,
      }));
      this.mirror.onTransition((x) => t.transition(x));
      this.mirror.onChange(() => t.changed());
      this.subscriber.onChange(() => t.changed());
      this.transitions = t;
    }
  }

  /** Connects to the publisher (in the background: the server may start later than the node). */
  start(): void {
    this.subscriber.start();
  }

  get exact(): boolean {
    return this.subscriber.isSynced && this.mirror.degraded === undefined;
  }

  /** What the server will report as cached for `tokens` (of namespace `ns`), while the mirror is exact. */
  predict(tokens: Tokens, ns: NamespaceFields = {}): number | undefined {
    if (!this.exact) return undefined;
    const n = this.opts.computesLastToken ? Math.max(0, tokens.length - 1) : tokens.length;
    return this.mirror.match(tokens.subarray(0, n), ns);
  }

  /**
   * After a run of `tokens`: records the prediction against the server's report (undefined: none),
   * and returns every sequence the server now caches, as well as it is known.
   */
  async afterRun(
    tokens: Tokens,
    predicted: number | undefined,
    reported: number | undefined,
    ns: NamespaceFields = {},
  ): Promise<Tokens[]> {
    this.observe(predicted, reported);
    this.remember(keyTokens({ cacheSalt: ns.cacheSalt, adapter: ns.adapter, tokens }));
    if (this.exact) {
      await this.settle(tokens, ns);
      if (this.exact) return this.mirror.sequences();
    }
    return [...this.mirror.sequences(), ...this.fallback.sequences()];
  }

  /** Every sequence the server caches, as well as it is known now (what `afterRun` would return). */
  sequences(): Tokens[] {
    return this.exact ? this.mirror.sequences() : [...this.mirror.sequences(), ...this.fallback.sequences()];
  }

  /** Calls `fn` after each change of the mirror (events applied, cleared, degraded). */
  watch(fn: () => void): () => void {
    return this.mirror.onChange(fn);
  }

  status(): KvEventsStatus {
    return {
      exact: this.exact,
      degraded: this.degradedReason(),
      subscriber: this.subscriber.status(),
      mirror: this.mirror.stats(),
      accuracy: { ...this.acc },
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const finish of this.settling) finish();
    await this.subscriber.close();
    this.transitions?.close();
  }

  private degradedReason(): string | undefined {
    return (
      this.mirror.degraded ?? (this.subscriber.isSynced ? undefined : "waiting for the publisher's history")
    );
  }

  private observe(predicted: number | undefined, reported: number | undefined): void {
    if (reported === undefined) return;
    if (predicted === undefined) {
      this.acc.unpredicted++;
      return;
    }
    this.acc.requests++;
    if (predicted === reported) this.acc.exact++;
    this.acc.predictedTokens += predicted;
    this.acc.reportedTokens += reported;
    this.acc.absErrorTokens += Math.abs(predicted - reported);
  }

  /** The LRU model: the prompt is cached, the least recently used runs make room for it. */
  private remember(tokens: Tokens): void {
    const now = ++this.tick;
    const need = tokens.length - this.fallback.match(tokens);
    if (need > this.fallback.free()) this.fallback.evict(need - this.fallback.free());
    this.fallback.insert(tokens, now);
  }

  /**
   * The server publishes a run's blocks as it computes them, so they are normally in by the time its
   * response ends; a short, bounded wait covers the batch still in flight. Once closed, nothing more
   * arrives: no wait.
   */
  private settle(tokens: Tokens, ns: NamespaceFields): Promise<void> {
    if (this.opts.settleMs === 0 || this.closed) return Promise.resolve();
    // Before the first store the block size is unknown: wait for it (bounded) as for any block.
    const done = () => {
      const bs = this.mirror.blockSize;
      if (!this.exact) return true;
      if (bs === undefined || bs === 0) return false;
      return this.mirror.match(tokens, ns) >= Math.floor(tokens.length / bs) * bs;
    };
    if (done()) return Promise.resolve();
    return new Promise((resolve) => {
      const finish = () => {
        clearTimeout(timer);
        off();
        this.settling.delete(finish);
        resolve();
      };
      this.settling.add(finish);
      const timer = setTimeout(finish, this.opts.settleMs);
      const off = this.mirror.onChange(() => {
        if (done()) finish();
      });
    });
  }
}
