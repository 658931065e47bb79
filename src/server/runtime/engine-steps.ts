/**
 * A client request's engine steps before it is submitted — its chat template and its tokenize — as the
 * API calls them: each bounded by `--tokenize-timeout-ms`, since an engine that never answers (a remote
 * /tokenize that hangs) would keep its client waiting, and a shutdown's drain, for good (the step
 * itself holds a `--max-pending` place until the engine ends it: `overdue`); a failure is read as the
 * client's error (engine-step-errors.ts). A peer's forward in another model's tokens takes the same
 * bound (`bounded`), else it would hold its origin until its forward timeout.
 */
import type { ChatMessage, Engine, Tokens } from "../../core/engine.js";
import { ServiceError } from "../service.js";
import { type EngineStepContext, engineStepFailure } from "./engine-step-errors.js";

/** Far above any real tokenize (milliseconds), and below a remote engine's own HTTP bounds. */
export const DEFAULT_TOKENIZE_TIMEOUT_MS = 30_000;

/** What a client is told when the engine's `step` gave no answer within `ms`. */
export function stepTimeoutError(step: string, ms: number): ServiceError {
  return new ServiceError(
    504,
    "server_error",
    `engine: ${step} gave no answer within ${ms} ms (--tokenize-timeout-ms)`,
  );
}

export interface EngineStepsOptions extends EngineStepContext {
  engine: Engine;
  /** `--tokenize-timeout-ms` (default DEFAULT_TOKENIZE_TIMEOUT_MS). */
  tokenizeTimeoutMs?: number | undefined;
}

export class EngineSteps {
  private readonly engine: Engine;
  private readonly timeoutMs: number;
  private readonly failed: (err: unknown) => never;
  private late = 0;

  constructor(o: EngineStepsOptions) {
    this.engine = o.engine;
    this.timeoutMs = o.tokenizeTimeoutMs ?? DEFAULT_TOKENIZE_TIMEOUT_MS;
    this.failed = engineStepFailure(o);
  }

  // The engine's own failure is read (engineStepFailure); the bound's 504 is not: a step that timed out
  // while the node drains did not end by the shutdown, whose 503 would say so.
  tokenize(text: string): Promise<Tokens> {
    return this.bounded(this.engine.tokenize(text).catch(this.failed), "tokenize");
  }

  applyChatTemplate(messages: ChatMessage[]): Promise<string> {
    return this.bounded(this.engine.applyChatTemplate(messages).catch(this.failed), "chat template");
  }

  /**
   * Steps past the bound that the engine still runs: their clients have had the 504, but each still
   * holds the engine's work (a remote one's connection), so they count against `--max-pending` until
   * they end — else a burst against a hung engine would open calls to it without bound.
   */
  get overdue(): number {
    return this.late;
  }

  /**
   * `step`, or a 504 once the bound passes. The engine's call is left to end on its own (a remote one
   * by its HTTP timeouts): no AbortSignal per request, a visible cost on the router's hot path. Also
   * a peer's forward re-tokenized here (peer-traffic.ts), its failure left raw for the forward's error.
   */
  bounded<T>(step: Promise<T>, what: string): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_go, fail) => {
      timer = setTimeout(() => {
        this.late++;
        const ended = () => {
          this.late--;
        };
        step.then(ended, ended);
        fail(stepTimeoutError(what, this.timeoutMs));
      }, this.timeoutMs);
      // A bound alone keeps no process alive (an embedder's, after stop(), up to an hour).
      timer.unref();
    });
    return Promise.race([step, late]).finally(() => clearTimeout(timer));
  }
}
