/**
 * Follows one KV-event publisher (vLLM's or SGLang's ZmqEventPublisher) into a `KvCacheMirror`, in
 * sequence order, with nothing lost silently. The rules, and why each (docs/engines-kv-events.md,
 * "Degraded: when, and back to exact"):
 * - A reader queues live batches (bounded: the oldest dropped, a gap); one worker applies them in order.
 * - History: at first and after a restart, a replay from 0 (a buffer not starting at 0: degraded);
 *   one that failed is tried again while idle every `historyRetryMs`, whether the probe is on or off.
 * - Gap (a live batch above the next expected): a replay from the first missing number, read only up
 *   to that batch while it is surely the same publisher's (not after a replay found a restart, or a
 *   dropped connection since it came: then whole). One that cannot cover it degrades the mirror and
 *   forgets the blocks held (`KvCacheMirror.forget`): the lost batches may have removed them, or been
 *   a restarted engine's.
 * - Restart: a live number going back clears the mirror and reads the history again; one numbered
 *   past ours shows in a replay from the last batch applied (another batch there), also run after a
 *   dropped connection. A check failing before it compares forgets too; no replay endpoint, no check.
 * - Idle probe: no live batch for `probeIntervalMs`: a replay catches batches a SUB dropped silently.
 *
 * Every wait is bounded (`replayTimeoutMs` per replay), every queue and message size capped. This file
 * keeps the sequence rules; the queue is live-queue.ts, the replay socket replay-client.ts, a replay's
 * batches (the check of the publisher at its first, the lost ones) replay-reading.ts, the SUB socket
 * and its reconnect reconnect.ts.
 */
import type { Subscriber } from "zeromq";
import { type Live, LiveQueue } from "./live-queue.js";
import type { KvCacheMirror } from "./mirror.js";
import { subscribe, watchConnection } from "./reconnect.js";
import { ReplayClient } from "./replay-client.js";
import { type ReplayOutcome, ReplayReading } from "./replay-reading.js";
import { decodeSequence, topicOf } from "./sequence-frame.js";
import type { KvSubscriberOptions, KvSubscriberState, KvSubscriberStatus } from "./subscriber-types.js";
import { decodeBatch } from "./wire.js";
import { DEFAULT_WIRE_LIMITS, type KvEventBatch, KvWireError, type WireLimits } from "./wire-types.js";

export type { KvSubscriberOptions, KvSubscriberState, KvSubscriberStatus } from "./subscriber-types.js";

export class KvEventsSubscriber {
  private readonly endpoint: string;
  /** Undefined without a replay endpoint: then any gap degrades. */
  private readonly replays: ReplayClient | undefined;
  private readonly topic: Buffer;
  private readonly probeIntervalMs: number;
  private readonly historyRetryMs: number;
  private readonly limits: WireLimits;
  private sub: Subscriber | undefined;
  private readonly queue: LiveQueue;
  private lastLiveSeq: number | undefined;
  /** The publisher's epoch, when its topic frames carry one (SGLang with a snapshot endpoint). */
  private epoch: string | undefined;
  private next: number | undefined;
  private synced = false;
  private state: KvSubscriberState = "waiting";
  private closed = false;
  private tasks: Promise<void>[] = [];
  private readonly changed = new Set<() => void>();
  private readonly counts = {
    gaps: 0,
    replays: 0,
    replayedBatches: 0,
    replayFailures: 0,
    rejected: 0,
    dropped: 0,
    restarts: 0,
    reconnects: 0,
  };
  private lastBatchAt: number | undefined;
  private lastBatchTs: number | undefined;
  private lastError: string | undefined;
  /** The last batch applied, to recognise its publisher in a later replay. */
  private lastApplied: { seq: number; payload: Uint8Array } | undefined;
  /** The connection dropped: the next live batch received may be a new publisher's (check it). */
  private dropSeen = false;

  constructor(
    private readonly mirror: KvCacheMirror,
    opts: KvSubscriberOptions,
  ) {
    this.endpoint = opts.endpoint;
    this.topic = Buffer.from(opts.topic ?? "", "utf8");
    this.queue = new LiveQueue(opts.maxQueuedBatches ?? 4_096, opts.maxQueuedBytes ?? 64 << 20);
    this.probeIntervalMs = opts.probeIntervalMs ?? 5_000;
    // A mirror that missed its history must recover while the engine is idle, probe or none.
    this.historyRetryMs = opts.historyRetryMs ?? (this.probeIntervalMs || 5_000);
    this.limits = { ...DEFAULT_WIRE_LIMITS, ...opts.limits };
    this.replays = opts.replayEndpoint
      ? new ReplayClient(
          {
            endpoint: opts.replayEndpoint,
            timeoutMs: opts.replayTimeoutMs ?? 2_000,
            maxBatches: opts.maxReplayBatches ?? 100_000,
            maxMessageSize: this.limits.maxPayloadBytes + 1024,
          },
          () => this.closed,
        )
      : undefined;
  }

  /** Connects and starts following; returns at once (the sockets connect in the background). */
  start(): void {
    if (this.sub) throw new Error("subscriber already started");
    const sub = subscribe(this.endpoint, this.topic, this.limits.maxPayloadBytes);
    watchConnection(sub, this.endpoint, {
      closed: () => this.closed,
      dropped: () => {
        this.lastError = "the connection to the publisher dropped";
        this.dropSeen = true;
      },
      reconnecting: () => {
        this.counts.reconnects++;
      },
    });
    this.sub = sub;
    this.tasks.push(this.read(sub), this.work());
  }

  /** Called after the worker applied something or changed state. */
  onChange(fn: () => void): () => void {
    this.changed.add(fn);
    return () => this.changed.delete(fn);
  }

  get isSynced(): boolean {
    return this.synced;
  }

  status(): KvSubscriberStatus {
    return {
      state: this.state,
      synced: this.synced,
      nextSequence: this.next,
      lastBatchAt: this.lastBatchAt,
      lastBatchTs: this.lastBatchTs,
      queued: this.queue.length,
      ...this.counts,
      lastError: this.lastError,
    };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.state = "closed";
    this.sub?.close();
    this.replays?.close();
    this.queue.wake();
    await Promise.allSettled(this.tasks);
  }

  private async read(sub: Subscriber): Promise<void> {
    try {
      for await (const frames of sub) {
        if (this.closed) break;
        this.onMessage(frames);
      }
    } catch (e) {
      if (!this.closed) this.lastError = `subscriber socket failed: ${(e as Error).message}`;
    }
  }

  private onMessage(frames: Buffer[]): void {
    const topic = frames.length === 3 ? topicOf(frames[0]!, this.topic) : null;
    if (!topic) {
      this.reject(`a message of ${frames.length} frames or another topic`);
      return;
    }
    let seq: number;
    try {
      seq = decodeSequence(frames[1]!);
    } catch (e) {
      this.reject((e as Error).message);
      return;
    }
    // SUB delivers one publisher's messages in order and once: a lower number is a new publisher.
    // Another epoch (SGLang) is a new publisher too, even one numbered past the last batch.
    const newEpoch = topic.epoch !== undefined && this.epoch !== undefined && topic.epoch !== this.epoch;
    const restart = (this.lastLiveSeq !== undefined && seq <= this.lastLiveSeq) || newEpoch;
    this.lastLiveSeq = seq;
    if (topic.epoch !== undefined) this.epoch = topic.epoch;
    // Batches queued before the drop are the old connection's: only those after it need the check.
    const afterDrop = this.dropSeen;
    this.dropSeen = false;
    this.counts.dropped += this.queue.push({ seq, payload: frames[2]!, restart, afterDrop });
  }

  private async work(): Promise<void> {
    if (this.replays) await this.fetchHistory();
    while (!this.closed) {
      const first = this.queue.first();
      if (first?.afterDrop) {
        first.afterDrop = false;
        // A live batch numbered back already says so: checking too would handle the restart twice.
        if (this.synced && this.next !== undefined && this.replays && !this.queue.hasRestart()) {
          const outcome = await this.probe(this.next);
          // Unchecked, the batch may be a restarted engine's numbered just as expected.
          if (outcome.kind === "failed" && !outcome.checked)
            this.mirror.forget(
              `the connection dropped and the publisher could not be checked: ${outcome.why}`,
            );
        }
        continue;
      }
      const item = this.queue.shift();
      if (item) {
        await this.process(item);
        continue;
      }
      // Idle: the probe's interval, or the history's retry while it is unread.
      const woke = await this.queue.wait(
        this.synced || !this.replays ? this.probeIntervalMs : this.historyRetryMs,
      );
      if (this.closed) break;
      if (!woke && this.replays) {
        if (!this.synced) await this.fetchHistory();
        else if (this.next !== undefined) await this.probe(this.next);
      }
    }
  }

  private async process(item: Live): Promise<void> {
    if (item.restart) this.restarted();
    if (!this.synced) {
      if (item.seq === 0) {
        this.mirror.clear();
        this.synced = true;
        this.next = 0;
      } else if (this.replays) {
        this.queue.unshift({ ...item, restart: false });
        // A connection dropped since it came: the publisher replaying may be a new one, past it.
        const dropped = this.dropSeen || this.queue.hasAfterDrop();
        await this.fetchHistory(true, dropped ? undefined : item.seq);
        return;
      } else {
        this.synced = true;
        this.mirror.markDegraded(`batches before ${item.seq} are unknown and there is no replay endpoint`);
        this.next = item.seq;
      }
    }
    const next = this.next!;
    if (item.seq < next) return; // already applied from a replay
    if (item.seq > next) {
      this.counts.gaps++;
      // Read only up to this batch: it and those queued behind it are the rest.
      const outcome: ReplayOutcome = this.replays
        ? await this.replay(next, undefined, item.seq)
        : { kind: "failed", why: "there is no replay endpoint", checked: false };
      if (outcome.kind === "restarted") {
        this.queue.unshift({ ...item, restart: false });
        // Read whole: this batch may be the old publisher's, queued before it went, and the new
        // numbering may have passed it; read up to it, it would follow the new history.
        await this.fetchHistory(true);
        return;
      }
      // A short replay forgot the blocks before the gap itself, before applying what it brought, maybe
      // past this batch. A failed one may have brought part of the gap: only batches still missing are lost.
      if (item.seq < this.next!) return; // the replay brought it
      if (item.seq > this.next!) {
        const why = outcome.kind === "failed" ? outcome.why : "the replay did not bring them";
        this.mirror.forget(`lost batches ${this.next}–${item.seq - 1}: ${why}`);
        this.next = item.seq;
      }
    }
    this.apply(item.seq, item.payload);
  }

  /**
   * The history from sequence 0. `force`: a live batch is waiting, so an unreachable endpoint now
   * means following from that batch, degraded; without it (idle), the worker tries again later.
   * `until`: that batch's number, when it is known to be the replaying publisher's: the history is
   * read up to it, as the queue holds the rest.
   */
  private async fetchHistory(force = false, until?: number): Promise<void> {
    this.next = 0;
    this.lastApplied = undefined;
    this.mirror.clear();
    const outcome = await this.replay(
      0,
      (_, after) =>
        this.mirror.markDegraded(`the publisher's buffer starts at batch ${after}: earlier ones are lost`),
      until,
    );
    if (outcome.kind === "covered" || outcome.kind === "short") {
      this.becameSynced();
      return;
    }
    const first = force ? this.queue.first() : undefined;
    // It failed after bringing every batch before the one waiting: none is missing, and following
    // from that batch would apply those it brought past it a second time.
    if (outcome.kind === "failed" && first && this.next !== undefined && this.next >= first.seq) {
      this.becameSynced();
      return;
    }
    this.next = undefined;
    if (outcome.kind === "restarted") return; // not from 0: nothing to compare with
    if (force) {
      this.synced = true;
      this.mirror.markDegraded(`the history is unknown: ${outcome.why}`);
      this.next = first?.seq;
    }
  }

  /** The history is read: said to the listeners, as the mirror may be exact from now on. */
  private becameSynced(): void {
    this.synced = true;
    this.notify();
  }

  private notify(): void {
    for (const fn of this.changed) fn();
  }

  /** A replay from `from` while idle: nothing lost is the usual answer. */
  private async probe(from: number): Promise<ReplayOutcome> {
    const outcome = await this.replay(from);
    if (outcome.kind === "restarted") await this.fetchHistory();
    return outcome;
  }

  /**
   * Asks for every buffered batch from `from` and applies those numbered `next` onward (replay-reading.ts).
   * `lost` runs once, before the first batch after lost ones: by default the mirror forgets what it held,
   * as the lost batches may have removed it or come from a new engine (no batch left to check it by).
   * `until`: a live batch waiting in hand or at the queue's head; the replay stops once every batch
   * before it is applied, rather than read the engine's whole buffer within the replay timeout.
   */
  private async replay(
    from: number,
    lost: (first: number, after: number) => void = (first, after) =>
      this.mirror.forget(`lost batches ${first}–${after - 1}: the publisher no longer buffers them`),
    until?: number,
  ): Promise<ReplayOutcome> {
    this.state = "replaying";
    this.counts.replays++;
    const reading = new ReplayReading(
      from,
      this.lastApplied,
      {
        next: () => this.next,
        apply: (seq, payload) => {
          this.next = seq;
          this.counts.replayedBatches++;
          this.apply(seq, payload);
        },
        forget: (why) => this.mirror.forget(why),
        lost,
      },
      until,
    );
    try {
      const read = await this.replays!.request(reading.start, reading.batch);
      if (read.kind === "failed") {
        this.counts.replayFailures++;
        this.lastError = read.why;
      }
      const outcome = reading.outcome(read);
      if (outcome.kind === "restarted") this.restarted();
      return outcome;
    } finally {
      if (!this.closed) this.state = "live";
    }
  }

  /** Applies batch `seq` (next expected): a batch that does not decode loses its events: degraded. */
  private apply(seq: number, payload: Uint8Array): void {
    this.next = seq + 1;
    this.lastApplied = { seq, payload };
    let batch: KvEventBatch;
    try {
      batch = decodeBatch(payload, this.limits);
    } catch (e) {
      if (!(e instanceof KvWireError)) throw e;
      this.reject(e.message);
      this.mirror.markDegraded(`batch ${seq} could not be decoded: ${e.message}`);
      return;
    }
    this.mirror.apply(batch);
    this.lastBatchAt = Date.now();
    this.lastBatchTs = batch.ts;
    this.notify();
  }

  /** A new publisher: its engine's cache started empty, and its history is yet to be read. */
  private restarted(): void {
    this.counts.restarts++;
    this.synced = false;
    this.next = undefined;
    this.lastApplied = undefined;
    this.mirror.clear();
  }

  private reject(why: string): void {
    this.counts.rejected++;
    this.lastError = why;
  }
}
