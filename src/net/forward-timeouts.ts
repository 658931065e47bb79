/**
 * A forward's transport timeouts. The configured ones (start-node.ts derives them from the node's
 * `forwardTimeoutMs`) are a backstop behind the node's own forward timer, but that timer is per
 * request: a long run is waited for longer (forward-acks.ts `forwardTimeoutFor`). Each forward carries
 * what its origin still waits for it (`deadlineMs`), so its first-frame, gap and total bounds are
 * widened to that plus a margin: the transport never gives up on a run before the node does.
 */

/** How far behind the node's own wait the transport gives up. */
export const FORWARD_TIMEOUT_MARGIN_MS = 5_000;

/** The wire's bound on `deadlineMs`. */
const MAX_WAIT_MS = 3_600_000;

export interface StreamTimeouts {
  firstByteMs: number;
  gapMs: number;
  forwardTotalMs: number;
}

/** `t`, each bound at least `deadlineMs` + the margin when the forward carries a sane `deadlineMs`. */
export function forwardTimeouts<T extends StreamTimeouts>(t: T, deadlineMs: number | undefined): T {
  if (deadlineMs === undefined || !Number.isFinite(deadlineMs) || deadlineMs < 0) return t;
  const wait = Math.min(deadlineMs, MAX_WAIT_MS) + FORWARD_TIMEOUT_MARGIN_MS;
  return {
    ...t,
    firstByteMs: Math.max(t.firstByteMs, wait),
    gapMs: Math.max(t.gapMs, wait),
    forwardTotalMs: Math.max(t.forwardTotalMs, wait),
  };
}
