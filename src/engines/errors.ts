/** Errors engines raise, so servers can map them to HTTP statuses (4xx for the caller's fault). */

/**
 * The request is invalid for this engine (too long, bad token ids, bad parameters), or a remote
 * server refused it with a 4xx (`status`): see `engineFault` for which of those are the client's.
 */
export class EngineInputError extends Error {
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
    this.name = "EngineInputError";
  }
}

/**
 * The engine (or the remote server) failed or is unreachable: a 502/503. `status`: the server's last
 * HTTP status, if it answered; `retryAfterMs`: its last Retry-After, if it sent one.
 */
export class EngineUnavailableError extends Error {
  constructor(
    message: string,
    readonly status?: number,
    readonly retryAfterMs?: number,
  ) {
    super(message);
    this.name = "EngineUnavailableError";
  }
}

/**
 * The run was aborted through its signal. `keptTokens` (node-managed caches): leading tokens of the
 * request's cache key the engine holds cached after it (what its prefill got through), so the node's
 * tree takes exactly those; 0 or absent: nothing new.
 */
export class EngineAbortedError extends Error {
  constructor(readonly keptTokens?: number) {
    super("request aborted");
    this.name = "AbortError";
  }
}

/**
 * Whose fault an engine's failure is, the one reading every client-facing mapping uses:
 * `input`, the request's (our own checks, or a server's 400/413/422 about the prompt);
 * `setup`, the engine's configuration (a 401/403 key, a 404/405 URL or model path, any other 4xx);
 * `load`, the server busy for now (after the retries: its 429 rate limit, its 503 overload or model
 * loading, its 408 request timeout — transient, not the setup); `down`, the server failed or is
 * unreachable. Undefined: not an engine failure.
 */
export type EngineFault = "input" | "setup" | "load" | "down";

const CLIENT_STATUSES = new Set([400, 413, 422]);
const LOAD_STATUSES = new Set([408, 429, 503]);

export function engineFault(err: unknown): EngineFault | undefined {
  if (err instanceof EngineInputError) {
    if (err.status === undefined || CLIENT_STATUSES.has(err.status)) return "input";
    return LOAD_STATUSES.has(err.status) ? "load" : "setup";
  }
  if (err instanceof EngineUnavailableError)
    return err.status !== undefined && LOAD_STATUSES.has(err.status) ? "load" : "down";
  return undefined;
}

/**
 * The words an undici timeout `code` adds to a failure: its code alone tells an operator little, so
 * say what the server did not do, and for how long (the client's bounds). Empty for other codes.
 */
export function stallNote(
  code: unknown,
  bounds: { headersTimeoutMs?: number; bodyTimeoutMs?: number },
): string {
  if (code === "UND_ERR_HEADERS_TIMEOUT" && bounds.headersTimeoutMs !== undefined)
    return ` (no response within ${bounds.headersTimeoutMs} ms: the server is stalled or overloaded)`;
  if (code === "UND_ERR_BODY_TIMEOUT" && bounds.bodyTimeoutMs !== undefined)
    return ` (the server stopped sending mid-stream for ${bounds.bodyTimeoutMs} ms)`;
  return "";
}
