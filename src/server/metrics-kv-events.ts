/**
 * The series of a remote engine followed by KV events (prefixmesh_engine_kv_*: vLLM, SGLang), apart
 * from metrics.ts as they exist only with --engine-kv-events; metrics.ts registers them in its place.
 */
import { Counter, Gauge, type Registry } from "prom-client";

export interface KvEventsGaugeView {
  /** The mirror holds exactly the engine's cache (history known, nothing lost since). */
  exact: boolean;
  blocks: number;
  reachableBlocks: number;
  /** Cumulative counts by event, as /cluster's engineCache.kvEvents names them (camelCase). */
  subscriber: Record<string, number>;
  mirror: Record<string, number>;
}

/** prom-client's label values are snake_case, /cluster's field names camelCase: `replayFailures` → `replay_failures`. */
const snake = (s: string) => s.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** The KV-event stream's and mirror's series, read at scrape time from the engine's status. */
export function kvEventMetrics(registers: Registry[], view: () => KvEventsGaugeView | undefined): void {
  const counts = (name: string, help: string, read: (k: KvEventsGaugeView) => Record<string, number>) =>
    new Counter({
      name,
      help,
      labelNames: ["event"],
      registers,
      collect() {
        const k = view();
        if (!k) return;
        this.reset();
        for (const [event, n] of Object.entries(read(k))) this.inc({ event: snake(event) }, n);
      },
    });
  counts(
    "prefixmesh_engine_kv_subscriber_events_total",
    "The engine's KV-event stream (only with --engine-kv-events, as every prefixmesh_engine_kv_ series), " +
      "by event: gaps (live batches numbered past the next expected), replays (asked of the replay " +
      "endpoint), replayed_batches, replay_failures, rejected (messages refused: wrong frames or topic, " +
      "bad sequence numbers, payloads that do not decode), dropped (live batches dropped from a full queue), restarts (a new " +
      "publisher: the mirror cleared), reconnects",
    (k) => k.subscriber,
  );
  counts(
    "prefixmesh_engine_kv_mirror_events_total",
    "The engine's KV-event mirror, by event: batches and events applied, blocks stored and removed, " +
      "cleared (AllBlocksCleared), other_medium, other_group (ignored), other_rank (refused, degrades), " +
      "conflicts, unknown_removals, malformed (each degrades the mirror), forgotten (blocks dropped after batches " +
      "lost for good)",
    (k) => k.mirror,
  );
  const gauge = (name: string, help: string, read: (k: KvEventsGaugeView) => number) =>
    new Gauge({
      name,
      help,
      registers,
      collect() {
        const k = view();
        if (k) this.set(read(k));
      },
    });
  gauge(
    "prefixmesh_engine_kv_mirror_exact",
    "1 while the KV-event mirror holds exactly the engine's cache; 0 while degraded or its history is " +
      "unknown (routing here then adds an LRU guess: /cluster engineCache.kvEvents.degraded says why)",
    (k) => (k.exact ? 1 : 0),
  );
  gauge("prefixmesh_engine_kv_mirror_blocks", "Blocks the KV-event mirror holds", (k) => k.blocks);
  gauge(
    "prefixmesh_engine_kv_mirror_reachable_blocks",
    "Blocks of the KV-event mirror a prompt can match (their chain back to the start is held)",
    (k) => k.reachableBlocks,
  );
}
