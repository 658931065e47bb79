/**
 * What /cluster, /metrics and tests read of one peer (`PeerView`), its trust included. Part of the node
 * vocabulary (types.ts).
 */
import type { ForwardLimits, HeldVersion, NodeId } from "./peer-messages.js";

export type Liveness = "unknown" | "live" | "suspected" | "down";

/** Read-only view of one peer, for /cluster, /metrics and tests. */
export interface PeerView {
  id: NodeId;
  liveness: Liveness;
  /** ms since we last heard anything from it (undefined: never). */
  silentMs: number | undefined;
  /**
   * gossip "scuttlebutt" (no per-pair heartbeats, so no `silentMs`): ms since the newest state of its
   * estimate arrived and was applied, from it or a relay (undefined: none yet).
   */
  estimateAgeMs?: number | undefined;
  /** Which (epoch, version) of its tree our estimate holds. */
  held: HeldVersion | undefined;
  estimateTokens: number;
  queueDepth: number;
  /** Absolute time (our clock) until which we do not route to it; 0 = none. */
  pushBackUntil: number;
  /** Smoothed measured round-trip time of forwards (network part only), ms. */
  rttMs: number | undefined;
  /** What it last told us it holds of OUR tree. */
  holdsOfUs: HeldVersion | undefined;
  /** Forwards to it must be acked within the ack timeout (false: it was seen not to ack, e.g. old). */
  acksForwards: boolean;
  /** What its answers to our forwards earned it (trust.ts); undefined for a peer we do not track. */
  trust: TrustView | undefined;
  /** What it said a forward must fit, refusing one of ours that did not (peer-limits.ts); undefined: nothing. */
  limits?: ForwardLimits | undefined;
  /**
   * gossip "scuttlebutt": a member SWIM declared dead or saw leave, shown while SWIM remembers it
   * (no longer a member: its estimate is dropped): ms since it went.
   */
  goneForMs?: number | undefined;
  /** With `goneForMs`, why it went: "left" said goodbye (a planned stop), "dead" declared dead. */
  gone?: "left" | "dead" | undefined;
}

/** The trust kept of a peer out of the membership (trust.ts), for its return. */
export interface DepartedTrustView {
  id: NodeId;
  trust: TrustView;
  /** Ms since it left the membership (declared dead, left, or gone from DNS). */
  goneForMs: number;
  /** The newest epoch seen of it before it went (undefined: none seen); a newer one back is a restart. */
  epoch?: number | undefined;
}

/** A peer's circuit breaker (trust.ts). */
export type BreakerState = "closed" | "open" | "half-open" | "quarantined";

/** What /cluster and the metrics show of a peer's trust (trust.ts). */
export interface TrustView {
  /** Smoothed share of its forwards answered in time, in [0, 1] (1 until a failure). */
  score: number;
  state: BreakerState;
  /** Forwards it failed / refused for load, since our (re)start. */
  failures: number;
  /**
   * Of `failures`, those for answering late: past the first deadline of an attempt kept open by its
   * streamed output (trust.ts `late`), so slowness is told from errors.
   */
  late: number;
  refusals: number;
  /** Times its breaker opened. */
  opened: number;
}
