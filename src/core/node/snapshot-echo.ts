/**
 * The RTT echo of snapshot messages (peer-messages.ts: `at`, `echo {t, heldMs}`): each side echoes
 * the other's latest send time and how long it held it, so the round trip is timed on the sender's
 * own clock.
 */
import type { PeerSync } from "./peer-sync.js";
import type { SnapshotEcho } from "./types.js";

/**
 * Remembers the peer's send time for our next echo, and returns the round trip our last echoed
 * snapshot made, if this one times it. Peer-supplied numbers: anything non-finite, negative or longer
 * than `maxRttMs` (a forward's timeout) is ignored, so a bad peer can only bound-limit its own RTT.
 */
export function readEcho(
  peer: PeerSync,
  at: number | undefined,
  echo: SnapshotEcho | undefined,
  now: number,
  maxRttMs: number,
): number | undefined {
  if (typeof at === "number" && Number.isFinite(at)) {
    peer.echoT = at;
    peer.echoRxAt = now;
  }
  peer.echoed = echo !== undefined && Number.isFinite(echo.t) ? echo.t : undefined;
  if (echo === undefined) return undefined;
  const { t, heldMs } = echo;
  if (!Number.isFinite(t) || !Number.isFinite(heldMs) || heldMs < 0) return undefined;
  const rtt = now - t - heldMs;
  return rtt >= 0 && rtt <= maxRttMs ? rtt : undefined;
}
