/**
 * Which of a peer's errors are refusals for load (trust.ts: a back-off, no mark against the peer), kept
 * apart from the breaker so the classifier can grow without the trust record growing with it.
 */

/**
 * Errors a peer answers when it is busy, not broken: its serving role's overload and deadline
 * refusals, a transport's 429 or push-back, a drain on shutdown.
 */
const LOAD_REFUSAL = /^(overloaded|deadline|shutting down)|\b(busy|429|push-back|too many requests)\b/i;

/** Whether a peer's error is a refusal for load (no mark against it). */
export function isLoadRefusal(error: string): boolean {
  return LOAD_REFUSAL.test(error);
}
