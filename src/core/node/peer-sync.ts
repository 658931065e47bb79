/**
 * What anti-entropy keeps of each peer: the load its headers advertise (PeerLoad, read by routing), and
 * what it holds of our tree, what we sent it since, and the RTT echo between us (PeerSync).
 */
import type { EngineCosts } from "../snapshot.js";
import type { HeldVersion } from "./types.js";

/** What a peer advertised in its latest header, as we received it. */
export interface PeerLoad {
  queueDepth: number;
  /** When its queue depth was last reported (our clock). */
  queueAt: number | undefined;
  capacityTokens: number;
  /** Tokens in its tree as its latest header said (undefined until one arrived). */
  treeTokens: number | undefined;
  /** Our clock until which it asked not to be routed to; 0 = none. */
  pushBackUntil: number;
  /** When our estimate of it last changed or was confirmed (for the estimate's age). */
  estimateAt: number | undefined;
  /** Its engine costs, as its latest header advertised them (`advertiseCosts`); undefined if none. */
  costs?: EngineCosts | undefined;
}

export interface PeerSync extends PeerLoad {
  /** Epoch of its latest snapshot (a change means it restarted). */
  epoch: number | undefined;
  /** What it acknowledged holding of our tree. */
  holdsOfUs: HeldVersion | undefined;
  /**
   * Versions of our tree we sent it (delta or full) that its acks have not confirmed yet, oldest
   * first, with when we sent them: while young they are assumed delivered (the ack is in flight).
   */
  unconfirmed: { version: number; at: number }[];
  /**
   * `at` of our latest snapshot the peer had received when it sent its last message (its echo), and
   * of that message's ack (`holds`): a later send seen but an earlier version not held means the
   * earlier send was lost (or overtaken), whatever the optimism window says.
   */
  echoed: number | undefined;
  ackSawAt: number | undefined;
  /** Smoothed time from sending a version to its ack arriving (≈ RTT + the peer's poll wait). */
  ackDelayMs: number | undefined;
  /** Our estimate of it was found polluted: ask for a full snapshot (omit our ack). */
  wantFull: boolean;
  /** When we last made an optimistic insert into its estimate (after a forwarded result). */
  optimisticAt: number;
  /** `at` (its clock) of the last snapshot it sent us, and when it arrived (our clock): our echo. */
  echoT: number | undefined;
  echoRxAt: number;
}

/** Until when a member's advertised push-back holds, capped by ours (0: none): one rule for every carrier. */
export function pushBackUntil(now: number, pushBackMs: number, maxPushBackMs: number): number {
  return pushBackMs > 0 ? now + Math.min(pushBackMs, maxPushBackMs) : 0;
}

export function newPeerSync(): PeerSync {
  return {
    epoch: undefined,
    queueDepth: 0,
    queueAt: undefined,
    capacityTokens: 0,
    treeTokens: undefined,
    pushBackUntil: 0,
    estimateAt: undefined,
    holdsOfUs: undefined,
    unconfirmed: [],
    echoed: undefined,
    ackSawAt: undefined,
    ackDelayMs: undefined,
    wantFull: false,
    optimisticAt: Number.NEGATIVE_INFINITY,
    echoT: undefined,
    echoRxAt: 0,
  };
}
