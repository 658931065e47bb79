/** Errors engines raise, so servers can map them to HTTP statuses (4xx for the caller's fault). */

/** The request is invalid for this engine (too long, bad token ids, bad parameters): a 400. */
export class EngineInputError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "EngineInputError";
  }
}

/** The engine (or the remote server) failed or is unreachable: a 502/503. */
export class EngineUnavailableError extends Error {
  constructor(
    message: string,
    readonly status?: number,
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
