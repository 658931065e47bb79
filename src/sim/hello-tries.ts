/**
 * One try of a `verify-member` check in the simulators, as the daemon makes it (server/runtime/
 * mesh-verify.ts): a hello fetched from the member's address, retried on the daemon's schedule
 * (core/node/swim/verify-retry.ts) while nothing answers there, then answered no ("unreachable").
 * A process that is down answers no try; a frozen one answers a try still waiting when it resumes. A try
 * made while a partition separates the two gets no answer either: the hello is TCP, so message loss
 * (which retransmits hide) does not fail it, but a cut link drops every packet until the try gives up.
 */
import { verifyRetryMs } from "../core/node/swim/verify-retry.js";
import { DEFAULT_TIMEOUTS } from "../net/transport-timeouts.js";

/**
 * How long a try waits for a hello before it fails: the daemon's whole-exchange timeout (hello-exchange.ts).
 * Over mutual TLS a new connection to a frozen process gives up sooner (connectMs covers its handshake).
 */
const HELLO_WAIT_MS = DEFAULT_TIMEOUTS.messageTotalMs;

/** What try `attempt` leads to: the member's answer, another try, or the check answered no. */
export type HelloTry =
  | { k: "answer"; at: number }
  | { k: "retry"; at: number }
  | { k: "unreachable"; at: number };

/**
 * Try `attempt` (0-based), made at `now`. `answersAt`: when the member's process answers a request
 * (now if it runs, its resume if frozen, undefined if down); `rttMs`: a round trip to its address;
 * `cut`: a partition separates checker and member at `now` (nothing gets through, nor is refused).
 */
export function helloTry(
  now: number,
  attempt: number,
  answersAt: number | undefined,
  rttMs: number,
  cut = false,
): HelloTry {
  // The request reaches it half a round trip in; its answer must be back before the try gives up.
  const at = answersAt === undefined || cut ? undefined : Math.max(now + rttMs, answersAt + rttMs / 2);
  if (at !== undefined && at - now <= HELLO_WAIT_MS) return { k: "answer", at };
  // Nobody listens (refused in a round trip), or a cut link or frozen process outlasts the try's wait.
  const failedAt = now + (answersAt === undefined && !cut ? rttMs : HELLO_WAIT_MS);
  const wait = verifyRetryMs(attempt);
  return wait === undefined ? { k: "unreachable", at: failedAt } : { k: "retry", at: failedAt + wait };
}
