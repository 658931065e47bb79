/**
 * What reading a server's completion stream means for both the remote engine's `/v1/completions` and
 * llama-server's native `/completion`: the text one run may bring is bounded, and a failed read ends
 * the run with an engine error the servers map (an abort when the caller aborted).
 */
import { EngineAbortedError, EngineUnavailableError, stallNote } from "./errors.js";

/** The server controls how much it sends: past this a run fails instead of growing memory. */
const MAX_OUTPUT_CHARS = 4 << 20;

/** `text` with `piece` added, within the bound. */
export function appendOutput(text: string, piece: string): string {
  const out = text + piece;
  if (out.length > MAX_OUTPUT_CHARS) throw new EngineUnavailableError("server output exceeds the size bound");
  return out;
}

/** The error a stream read that threw `e` ends the run with; `bodyTimeoutMs`, the client's silence bound. */
export function streamFailure(e: unknown, signal: AbortSignal | undefined, bodyTimeoutMs: number): Error {
  if (signal?.aborted) return new EngineAbortedError();
  if (e instanceof EngineUnavailableError) return e;
  const stalled = stallNote((e as { code?: unknown } | undefined)?.code, { bodyTimeoutMs });
  return new EngineUnavailableError(`stream from server failed: ${(e as Error).message}${stalled}`);
}
