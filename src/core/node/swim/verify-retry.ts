/**
 * How a `verify-member` check retries an address that does not answer: the daemon's schedule
 * (server/runtime/mesh-verify.ts), shared with the simulators so that they answer as it does.
 */

/** Backoff after a try that got no answer: doubling from the first, up to the cap. */
export const VERIFY_RETRY_FIRST_MS = 250;
export const VERIFY_RETRY_MAX_MS = 10_000;
/** Tries of an address that does not answer before the check is answered no: about a minute of backoff. */
export const VERIFY_MAX_TRIES = 10;

/** The wait after try `attempt` (0-based) got no answer; undefined after the last: answered no. */
export function verifyRetryMs(attempt: number): number | undefined {
  if (attempt + 1 >= VERIFY_MAX_TRIES) return undefined;
  return Math.min(VERIFY_RETRY_MAX_MS, VERIFY_RETRY_FIRST_MS * 2 ** attempt);
}
