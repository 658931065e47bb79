/** The KV-event subscriber's options and the status it shows (subscriber.ts follows the stream). */
import type { WireLimits } from "./wire-types.js";

export interface KvSubscriberOptions {
  /** The publisher's PUB address, e.g. tcp://10.0.0.5:5557. */
  endpoint: string;
  /** Its ROUTER replay address, e.g. tcp://10.0.0.5:5558. Without one, any gap degrades. */
  replayEndpoint?: string | undefined;
  /** The publisher's topic (exact match; "" is the engines' default). */
  topic?: string;
  replayTimeoutMs?: number;
  /** Most batches a replay may return (the engines buffer 10 000 by default). */
  maxReplayBatches?: number;
  /** Live batches queued while the worker replays; beyond, the oldest are dropped (and replayed). */
  maxQueuedBatches?: number;
  /** The same bound in payload bytes. */
  maxQueuedBytes?: number;
  /** Replay-probe an idle publisher this often (0: never). */
  probeIntervalMs?: number;
  /** Until the history is read, a failed history replay is tried again this often (default: the probe
   * interval, or 5 s with the probe off). */
  historyRetryMs?: number;
  limits?: Partial<WireLimits>;
}

export type KvSubscriberState = "waiting" | "live" | "replaying" | "closed";

export interface KvSubscriberStatus {
  state: KvSubscriberState;
  /** True once the mirror follows the stream (exact or degraded); false while the history is unknown. */
  synced: boolean;
  nextSequence: number | undefined;
  /** Local time of the last batch applied, and the publisher's own timestamp on it (seconds). */
  lastBatchAt: number | undefined;
  lastBatchTs: number | undefined;
  queued: number;
  gaps: number;
  replays: number;
  replayedBatches: number;
  replayFailures: number;
  /** Messages refused: wrong frames or topic, bad sequence numbers, payloads that do not decode. */
  rejected: number;
  /** Live batches dropped from a full queue (then recovered by replay where the buffer allows). */
  dropped: number;
  restarts: number;
  /** Connections we made again after ZMQ gave one up (it does after an oversized message). */
  reconnects: number;
  lastError: string | undefined;
}
