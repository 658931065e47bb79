/**
 * A client request's engine steps before it is submitted — its chat template and its tokenize — as the
 * API calls them: each bounded by `--tokenize-timeout-ms`, since an engine that never answers (a remote
 * /tokenize that hangs) would keep its client waiting, and a shutdown's drain, for good. Past the bound
 * the step's signal aborts the engine's call (a remote one's HTTP request), which holds a
 * `--max-pending` place until it has ended (`overdue`), as when the client hangs up; the drain's end
 * answers every open step (`abortAll`); a failure is read as the client's error (engine-step-errors.ts).
 * A peer's forward in another model's tokens takes the same bound (`bounded`), else it would hold its
 * origin until its forward timeout, and is counted apart (`peerOpen`, `--max-peer-tokenizing`).
 */
import type { ChatMessage, Engine, Tokens } from "../../core/engine.js";
import { ServiceError } from "../service.js";
import { type EngineStepContext, engineStepFailure, shutDownError } from "./engine-step-errors.js";

/** Far above any real tokenize (milliseconds), and below a remote engine's own HTTP bounds. */
export const DEFAULT_TOKENIZE_TIMEOUT_MS = 30_000;

/** Peers' forwards tokenized here at once: tokenizing takes milliseconds, so only a hung engine nears it. */
export const DEFAULT_MAX_PEER_TOKENIZING = 32;

/** A client's answer (for the log: nobody reads it) when it hung up during its step. */
function clientGoneError(): ServiceError {
  return new ServiceError(499, "aborted", "client gone");
}

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
  private peerCalls = 0;
  /** Steps not yet answered: the drain's end answers and aborts them (`abortAll`). */
  private readonly open = new Set<(err: Error) => void>();

  constructor(o: EngineStepsOptions) {
    this.engine = o.engine;
    this.timeoutMs = o.tokenizeTimeoutMs ?? DEFAULT_TOKENIZE_TIMEOUT_MS;
    this.failed = engineStepFailure(o);
  }

  // The engine's own failure is read (engineStepFailure); the bound's 504 is not: a step that timed out
  // while the node drains did not end by the shutdown, whose 503 would say so.
  // `gone`: the client hung up, so its step is answered 499 and the engine's call aborted at once.
  tokenize(text: string, gone?: AbortSignal): Promise<Tokens> {
    const call = (signal: AbortSignal) => this.engine.tokenize(text, signal).catch(this.failed);
    return this.bounded(call, "tokenize", false, gone);
  }

  applyChatTemplate(messages: ChatMessage[], gone?: AbortSignal): Promise<string> {
    const render = (signal: AbortSignal) =>
      this.engine.applyChatTemplate(messages, signal).catch(this.failed);
    return this.bounded(render, "chat template", false, gone);
  }

  /**
   * Steps past the bound, or whose client hung up, that the engine still runs: their clients have had
   * the 504 (or are gone) and the call its abort, but one that ignores its signal still holds the
   * engine's work, so each counts against `--max-pending` until it ends — else a burst against a hung
   * engine (or of clients that hang up) would open calls without bound.
   */
  get overdue(): number {
    return this.late;
  }

  /**
   * Peers' forwards' engine calls (peer-traffic.ts) not yet ended, overdue ones included: counted
   * apart from `overdue`, so peers cannot take our clients' `--max-pending` places.
   */
  get peerOpen(): number {
    return this.peerCalls;
  }

  /**
   * The drain is over: each step still unanswered gets the shutdown's 503 now and its engine call
   * the abort. Else one started just before SIGTERM would outlive the drain (the bound may be the
   * longer) and its client be cut off unanswered, or get the 504 after the node had gone.
   */
  abortAll(): void {
    for (const end of [...this.open]) end(shutDownError());
  }

  /**
   * `call`'s step, or a 504 once the bound passes, when the call's signal is aborted so the engine
   * ends it now (a remote one's request), not at its own HTTP timeouts. Also a peer's forward
   * re-tokenized here (peer-traffic.ts, `forPeer`), its failure left raw for the forward's error.
   * `gone` aborted (the client hung up; a peer's: its origin cancelled the forward): the step is
   * answered 499 and its call aborted now.
   */
  bounded<T>(
    call: (signal: AbortSignal) => Promise<T>,
    what: string,
    forPeer = false,
    gone?: AbortSignal,
  ): Promise<T> {
    if (gone?.aborted) return Promise.reject(clientGoneError());
    const abort = new AbortController();
    const step = call(abort.signal);
    if (forPeer) {
      this.peerCalls++;
      const ended = () => {
        this.peerCalls--;
      };
      step.then(ended, ended);
    }
    let timer: NodeJS.Timeout | undefined;
    let end: (err: Error) => void = () => {};
    const cut = new Promise<never>((_go, fail) => {
      // Once only. A client's step cut short holds a place until the engine's call ends (its admission
      // ends now); the answer before the abort: the abort's own failure must not be it.
      end = (err) => {
        if (!this.open.delete(end)) return;
        if (!forPeer) {
          this.late++;
          const ended = () => {
            this.late--;
          };
          step.then(ended, ended);
        }
        fail(err);
        abort.abort();
      };
      this.open.add(end);
      timer = setTimeout(() => end(stepTimeoutError(what, this.timeoutMs)), this.timeoutMs);
      // A bound alone keeps no process alive (an embedder's, after stop(), up to an hour).
      timer.unref();
    });
    const hungUp = () => end(clientGoneError());
    gone?.addEventListener("abort", hungUp, { once: true });
    return Promise.race([step, cut]).finally(() => {
      clearTimeout(timer);
      this.open.delete(end);
      gone?.removeEventListener("abort", hungUp);
    });
  }
}
