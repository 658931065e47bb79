/**
 * The engine runs the node started, each with its AbortController: an `abort-run` effect (the
 * core's abort-runs.ts: nobody takes the run's answer any more) aborts it, and the engine's
 * rejection goes back as `engine-aborted` — not `engine-failed`, so trust and the failure counts
 * never see it. A run that ends before its abort takes hold goes back as `engine-done`, as ever.
 */
import type { Engine, EngineRequest, EngineResult, EvictedRun } from "../../core/engine.js";
import type { NodeInput } from "../../core/node/types.js";
import { EngineAbortedError } from "../../engines/errors.js";
import type { NodeMetrics } from "../metrics.js";
import { countPrediction } from "./cache-predictions.js";
import { engineRunFailed } from "./engine-step-errors.js";
import type { RuntimeLogger } from "./logger.js";

export class EngineRuns {
  private readonly running = new Map<string, AbortController>();

  constructor(
    private readonly o: {
      engine: Engine;
      metrics: NodeMetrics;
      logger: RuntimeLogger;
      feed: (input: NodeInput) => void;
      /** Output of a run, to whoever waits for it. */
      relay: (request: EngineRequest, text: string) => void;
      /** Whether `request` is a peer's forward (else our own client's). */
      forPeer: (request: EngineRequest) => boolean;
    },
  ) {}

  start(jobId: string, request: EngineRequest, evicted: EvictedRun[]): void {
    const { engine, metrics, feed } = this.o;
    if (evicted.length > 0) engine.evict?.(evicted);
    metrics.served.inc({ origin: this.o.forPeer(request) ? "peer" : "self" });
    const ctl = new AbortController();
    this.running.set(jobId, ctl);
    void engine
      .run(request, (c) => this.o.relay(request, c.text), ctl.signal)
      .then(
        (result: EngineResult) => {
          this.running.delete(jobId);
          countPrediction(metrics, result);
          feed({ type: "engine-done", jobId, result });
        },
        (err: Error) => {
          this.running.delete(jobId);
          if (ctl.signal.aborted) return void feed(this.abortedInput(jobId, err));
          const failed = engineRunFailed(jobId, err);
          // A prompt the engine refused or its load for now is no fault to act on (the client's
          // answer says it); any other failure is.
          const level = failed.fault === "engine" ? "warn" : "info";
          this.o.logger[level]({ err: err?.message, jobId, fault: failed.fault }, "engine run failed");
          feed(failed);
        },
      );
  }

  /** Aborts the run of `jobId`, if it still runs (else it has ended already: nothing to do). */
  abort(jobId: string): void {
    this.running.get(jobId)?.abort();
  }

  /**
   * Aborts every run still going, at shutdown after the drain: nobody takes their answers any more,
   * so each ends as `engine-aborted` (no failure warn, no failure count), and an embedded engine
   * stops between tokens rather than holding its close for the rest of the generation.
   */
  abortAll(): void {
    for (const ctl of this.running.values()) ctl.abort();
  }

  private abortedInput(jobId: string, err: Error): NodeInput {
    const { engine } = this.o;
    this.o.logger.debug({ jobId }, "engine run aborted");
    // An engine-managed cache kept what it kept of the run: the tree takes it now, not at the next run.
    if (engine.info.cacheMode === "engine-managed" && engine.cachedSequences)
      return { type: "engine-aborted", jobId, sequences: engine.cachedSequences() };
    const kept = err instanceof EngineAbortedError ? (err.keptTokens ?? 0) : 0;
    return kept > 0 ? { type: "engine-aborted", jobId, kept } : { type: "engine-aborted", jobId };
  }
}
