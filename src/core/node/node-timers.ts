/**
 * The node's timers and the key a runtime files each under. Part of the node vocabulary (types.ts).
 */
import { type SwimTimer, swimTimerKey } from "./swim/types.js";

/**
 * The node's timers. `poll` = the anti-entropy tick; `forward` = the timeout of one forward attempt;
 * `ack` = waiting for that attempt's `forward-ack` (or, once acked, for its overdue answer); `hedge` =
 * the next re-ask of a silent peer while the request runs here (hedge.ts); `acks` =
 * the one timer of the acks this node defers as a forward's receiver (`ackDeferMs`); `estimates` = the
 * next step of a large snapshot applied in steps (`estimateStepKeys`). A request has at
 * most one pending timer of each kind (the key leaves the attempt out), and the node ignores a timer
 * whose attempt is no longer the request's current one.
 */
export type Timer =
  | { kind: "poll" }
  | { kind: "forward"; reqId: string; attempt: number }
  | { kind: "ack"; reqId: string; attempt: number }
  /** The next re-ask of a silent peer while the request runs here (hedge.ts). */
  | { kind: "hedge"; reqId: string; attempt: number }
  | { kind: "acks" }
  | { kind: "estimates" }
  /** `gossip: "scuttlebutt"`: an anti-entropy round between two Δpoll ticks (gossipRoundsPerPoll). */
  | { kind: "gossip-round" }
  /** `gossip: "scuttlebutt"`: one of the SWIM membership's timers (swim/types.ts). */
  | { kind: "swim"; timer: SwimTimer };

/** The key a runtime files a pending timer under: one per kind, per request for per-request timers. */
export function timerKey(t: Timer): string {
  switch (t.kind) {
    case "poll":
    case "acks":
    case "estimates":
    case "gossip-round":
      return t.kind;
    case "forward":
      return `fwd:${t.reqId}`;
    case "ack":
      return `ack:${t.reqId}`;
    case "hedge":
      return `hedge:${t.reqId}`;
    case "swim":
      return `swim:${swimTimerKey(t.timer)}`;
  }
}
