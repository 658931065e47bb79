/**
 * Scuttlebutt's messages, settings, counters and what it is given (scuttlebutt.ts runs the rounds).
 */
import type { SnapshotHeader } from "../../snapshot.js";
import type { OwnerState } from "./states.js";

/** A member's id (node/types.ts's NodeId, restated: node/types.ts imports this file's messages). */
type NodeId = string;

/** One owner in a digest: which (epoch, version) of its tree the digest's sender holds. */
export interface DigestEntry {
  owner: NodeId;
  epoch: number;
  version: number;
}

/** A digest sender's own load: its queue depth and push-back, as a snapshot header carries them. */
export interface DigestLoad {
  queueDepth: number;
  pushBackMs: number;
}

export type GossipMessage =
  /**
   * Round start: what I hold; `room`: how many owners I do not hold yet I would take (0: none);
   * `load`: the sender's queue as it sends, so a partner's view of it is a round old, not as old as
   * the sender's last tree change; `summary`: the sender's cache summary tag (gossip/summary.ts).
   */
  | { type: "digest"; entries: DigestEntry[]; room: number; load?: DigestLoad; summary?: number }
  /** States the receiver lacks (deltas of one owner in order), and (answering a digest) what I lack. */
  | { type: "states"; states: OwnerState[]; wants: DigestEntry[] };

export interface ScuttlebuttConfig {
  fanout: number;
  /** Deltas kept per relayed owner. */
  deltaLog: number;
  /** Owners held at most (besides ourselves); Infinity = all. */
  maxEstimates: number;
  /** Most states in one message (a peer-controlled count on receipt). */
  maxStates: number;
  /** Most digest entries accepted in one message. */
  maxDigest: number;
  /** When full and without a clock, one in this many exchanges discovers a new owner. */
  discoveryOdds: number;
  /** When full, one new owner is asked for (to replace the least useful one) at most this often (ms). */
  discoveryMs: number;
  /**
   * A round's digests go to its partners one after another (the next when the previous answer came):
   * what one partner sent is not pulled again from the next. false: all at once.
   */
  chain: boolean;
  /** An owner we asked a peer for is not asked of another for this long (ms; the answer is on its way). */
  pendingMs: number;
  /** Whole key sets above this many keys apply in steps (`step`; Estimates); 0 = at once. */
  stepKeys?: number;
  /**
   * Each owner pushes its own change each round to the members that hold it (holders.ts): for
   * `maxEstimates` below N, where relays rarely carry the owners a node holds. Default off.
   */
  pushToHolders?: boolean;
  /** A holder not heard from (a digest listing us) in this many of our rounds is no longer pushed to. */
  holderLeaseRounds?: number;
  /** Holders pushed to at most. */
  maxHolders?: number;
  /** With `pushToHolders`: held owners a round's digest lists at most, picked at random (default 16). */
  digestSample?: number;
}

export const DEFAULT_SCUTTLEBUTT: ScuttlebuttConfig = {
  fanout: 3,
  deltaLog: 16,
  maxEstimates: Number.POSITIVE_INFINITY,
  maxStates: 256,
  maxDigest: 8_192,
  discoveryOdds: 8,
  discoveryMs: 5_000,
  chain: true,
  pendingMs: 250,
};

export interface ScuttlebuttCounters {
  digestsSent: number;
  statesSent: { full: number; delta: number };
  statesReceived: {
    applied: number;
    stale: number;
    duplicate: number;
    needFull: number;
    dropped: number;
    deferred: number;
  };
  invalid: number;
}

export interface ScuttlebuttDeps {
  random(): number;
  /** Our clock (ms), for `pendingMs`; default: no clock, nothing is pending. */
  now?(): number;
  /** Whether `owner` is a live member now (states of others are dropped); default: all are. */
  member?(owner: NodeId): boolean;
  /**
   * Whether a count mismatch on `owner` is worth a whole set now (default yes). A state that left the
   * owner before the result of our last forward to it predates the insert we guessed: not yet.
   */
  settled?(owner: NodeId): boolean;
  /** Told of every state applied (its header: the owner's load as of that version). */
  onApplied?(header: SnapshotHeader): void;
  /** Usefulness of a held owner (higher keeps it); default 0 for all. */
  score?(owner: NodeId): number;
}
