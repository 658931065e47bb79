/**
 * How an engine's failure at a tokenize or chat-template step, or in a run, reaches a client
 * (node-runtime.ts and engine-runs.ts call these): the reply code by whose fault it is, the text
 * bounded and without credentials, and the engine-setup hint said at most once a minute. Also the 503
 * a client gets when shutdown comes first.
 */
import type { NodeInput, RunFault } from "../../core/node/types.js";
import { EngineUnavailableError, engineFault } from "../../engines/errors.js";
import { ServiceError } from "../service.js";
import { serviceErrorOf } from "./client-streams.js";
import type { RuntimeLogger } from "./logger.js";

/** The engine-setup hint (a 401/403/404 from the engine) is logged at most this often. */
const SETUP_HINT_EVERY_MS = 60_000;
/** Longest engine error text a client is shown: a server's error body can be large. */
const ENGINE_MESSAGE_MAX = 300;
/** Longest Retry-After an engine's rate limit passes on to a client. */
const RETRY_AFTER_MAX_MS = 60_000;

/** A client's answer when the node shuts down before answering it. */
export function shutDownError(): ServiceError {
  return new ServiceError(503, "server_error", "node shut down before answering");
}

/** How a client reads an engine's failure: the node's words before the engine's. */
const ENGINE_PREFIX = "engine: ";

/** An engine's failure as a client reads it: engineRunError's text after ENGINE_PREFIX. */
export function engineMessage(err: Error): string {
  return `${ENGINE_PREFIX}${engineRunError(err)}`;
}

/**
 * An engine's failure, bounded, and with a URL's path only — its scheme, host, credentials
 * (`http://user:pass@host`) and query are the operator's, in the log, not the client's. The API key
 * travels in a header, never in these messages. A failed run's text (`engine-failed`), which the node
 * says as `engine: …`, as engineMessage does: both fit ENGINE_MESSAGE_MAX with the prefix.
 */
export function engineRunError(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  const text = message.replace(
    /[a-z][a-z0-9+.-]*:\/\/[^/\s]*(\/[^?#\s]*)?[^\s]*/gi,
    (_m, path: string | undefined) => path ?? "/",
  );
  const max = ENGINE_MESSAGE_MAX - ENGINE_PREFIX.length;
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/**
 * A failed run as the node takes it (`engine-failed`), with whose fault it is by the reading a
 * tokenize step's failure gets (`engineStepFailure`): the prompt refused, `input` (a 400); the
 * engine's rate limit or overload, `load` (a 503, with its wait bounded); else `engine` (a 502).
 */
export function engineRunFailed(jobId: string, err: unknown): Extract<NodeInput, { type: "engine-failed" }> {
  const error = engineRunError(err);
  const fault = runFaultOf(err);
  if (fault === "load") return { type: "engine-failed", jobId, error, fault, retryAfterMs: loadWaitMs(err) };
  return { type: "engine-failed", jobId, error, fault };
}

/**
 * Whose fault an engine's failure at a forward's step is, as the forward's `error` says it to the
 * origin (a run's, or a foreign forward's tokenize): `input` and `load` are a back-off there, no mark.
 */
export function runFaultOf(err: unknown): RunFault {
  const fault = engineFault(err);
  return fault === "input" || fault === "load" ? fault : "engine";
}

/** The wait an engine's load asks for, bounded: the server's Retry-After is its word, not ours. */
function loadWaitMs(err: unknown): number {
  const said = err instanceof EngineUnavailableError ? err.retryAfterMs : undefined;
  return Math.min(RETRY_AFTER_MAX_MS, Math.max(0, said ?? 1_000));
}

export interface EngineStepContext {
  now: () => number;
  logger: RuntimeLogger;
  isStopping: () => boolean;
}

/**
 * A tokenize or chat-template step the engine failed: ended by its close at shutdown, the client's
 * 503, as after the drain; otherwise by whose fault it is (`engineFault`), through the reply codes a
 * run's failure uses: the prompt refused, a 400 with the server's reason; the engine's setup (key,
 * URL) or the server down, a 502; its rate limit, a 503 with its Retry-After. Never a 500 that reads
 * as a bug of ours. One per node: it holds when the setup hint was last said.
 */
export function engineStepFailure(o: EngineStepContext): (err: unknown) => never {
  let setupHintAt = Number.NEGATIVE_INFINITY;
  return (err: unknown): never => {
    if (o.isStopping()) throw shutDownError();
    const fault = engineFault(err);
    if (fault === undefined) throw err;
    const error = engineMessage(err as Error);
    if (fault === "setup") {
      // Every request fails the same way until the operator acts: said once a minute, not per request.
      const now = o.now();
      const say = now - setupHintAt >= SETUP_HINT_EVERY_MS;
      if (say) setupHintAt = now;
      o.logger[say ? "warn" : "debug"](
        { err: (err as Error).message },
        "engine refused the node's request: check --engine-url and the engine API key",
      );
    }
    if (fault === "load") {
      throw new ServiceError(503, "server_error", error, Math.max(1, Math.ceil(loadWaitMs(err) / 1_000)));
    }
    throw serviceErrorOf({ ok: false, error, code: fault === "input" ? "invalid" : "engine" });
  };
}
