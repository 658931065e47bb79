/**
 * What a node measures: the record of each request it replies to (`RequestRecord`) and its counters
 * (`NodeStats`). Part of the node vocabulary (types.ts).
 */
import type { NodeId } from "./peer-messages.js";

/** Per-request record, completed at the origin when it replies (the paper's §5 measurements). */
export interface RequestRecord {
  reqId: string;
  origin: NodeId;
  /** The policy's first choice. */
  target: NodeId;
  /** The node that finally ran it (undefined if it failed). */
  servedBy: NodeId | undefined;
  /** Network hops of the successful attempt (0 = served at the origin). */
  hops: number;
  /** Forward attempts that failed (timeout, error, suspicion) before the final one. */
  fallbacks: number;
  policy: string;
  promptTokens: number;
  /** The paper's "expected hit": the chosen target's estimated match at decision time. */
  predictedHitTokens: number;
  /** Tokens the processing node actually reused from its cache. */
  actualHitTokens: number;
  queueMs: number;
  prefillMs: number;
  decodeMs: number;
  /** End-to-end time not spent queueing or computing at the server: forwarding + failed attempts. */
  networkMs: number;
  totalMs: number;
  receivedAt: number;
  finishedAt: number;
}

export interface NodeStats {
  clientRequests: number;
  servedLocal: number;
  servedForPeers: number;
  forwarded: number;
  fallbacks: number;
  /**
   * Replies to an attempt no longer current (after a fallback, or duplicates): dropped, or taken while
   * the request still waits (never answered twice). Hedged answers count as `hedgedAnswers` only.
   */
  lateReplies: number;
  duplicateForwards: number;
  /** Queued forwards dropped because their origin cancelled them (never started here). */
  cancelledForwards: number;
  /** Forward attempts abandoned because their `forward-ack` (or the answer to a probe) never came. */
  ackTimeouts: number;
  /** Probes: forwards re-sent for the same attempt because it was acked but its answer is overdue. */
  probes: number;
  /** Acked forward attempts abandoned because their answer was overdue (peer trust). */
  overdueAnswers: number;
  /** Forward attempts abandoned at the forward timeout (no ack wait or answer deadline ended them first). */
  forwardTimeouts: number;
  /**
   * Forward attempts a peer ended with an error held against it: not a refusal for load, for our own
   * protocol, or for its limits (trust.ts).
   */
  peerErrors: number;
  /** Forwards re-sent for the same attempt because it was not acked (up to `forwardResends`). */
  resends: number;
  /** Answers re-sent to an origin that probed for a forward we had already answered. */
  resentAnswers: number;
  /** Requests a silent peer answered while they ran here (hedge.ts): the local run went unreplied. */
  hedgedAnswers: number;
  /**
   * Our clients' requests settled unreplied because the client hung up (`client-gone`), by where
   * the request was: waiting in our queue (dropped), forwarded (its peer sent a `cancel`), or
   * running on our engine (aborted when the engine can: `abortedClientGone`; else it completes,
   * unreplied).
   */
  clientGoneQueued: number;
  clientGoneForwarded: number;
  clientGoneRunning: number;
  /** Of those, the ones given up because their deadline passed (answered 504), not a hang-up. */
  clientGoneDeadlineQueued: number;
  clientGoneDeadlineForwarded: number;
  clientGoneDeadlineRunning: number;
  /** `forward-ack`s ignored: unknown or finished request, an older attempt, or a duplicate. */
  ignoredAcks: number;
  /** Spot checks run (peers' deterministic answers recomputed here), and those that disagreed. */
  spotChecks: number;
  spotCheckMismatches: number;
  /** Our clients' requests moved from our queue to a peer expected to finish them sooner (offload). */
  offloaded: number;
  /** Queued forwards dropped when their turn came, their origin's deadline passed (never run). */
  expiredForwards: number;
  /** Forwards refused at once because the expected finish lies beyond the origin's deadline. */
  rejectedDeadline: number;
  /** Client requests refused at once: no node was expected to answer within the client's deadline. */
  clientDeadlineRefusals: number;
  rejectedOverload: number;
  /** Forwards refused for want of the prompt text this node's engine needs (`needsPromptText`). */
  promptTextRefused: number;
  engineFailures: number;
  /**
   * Engine runs aborted (abort-runs.ts), by why nobody took the answer: our client hung up, a
   * hedge's peer answered first, the origin of a forward sent its final cancel. Not failures.
   */
  abortedClientGone: number;
  abortedHedged: number;
  abortedCancelled: number;
  unknownSender: number;
  /** Peer messages refused as malformed (e.g. an oversized request id). */
  invalidMessages: number;
  snapshotsSent: { full: number; delta: number; heartbeat: number };
  snapshotsReceived: {
    applied: number;
    stale: number;
    duplicate: number;
    needFull: number;
    invalid: number;
    deferred: number;
  };
  evictedTokens: number;
}
