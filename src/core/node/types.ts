/**
 * The node protocol's vocabulary: what goes into a node (`NodeInput`), what comes out (`Effect`), the
 * messages peers exchange (`PeerMessage`) and what is recorded per request (`RequestRecord`).
 *
 * The node (`PrefixNode`, node.ts) is a pure state machine: `handle(input)` returns effects and never
 * does I/O itself. The simulator (src/sim) and the real daemon (src/server) both drive it:
 *  - `send`        → deliver `msg` to peer `to` (best effort; on connection refused/reset feed back a
 *                    `send-failed` input, which makes the node suspect that peer at once);
 *  - `engine-run`  → node-managed engines first free `evicted`, then run `request`, then keep at most
 *                    `cacheTokens` leading prompt tokens cached; feed back `engine-done`/`engine-failed`
 *                    with the SAME `jobId` (a node-local id, not the client's reqId);
 *  - `set-timer`   → after `delayMs` feed back `{type:"timer", timer}`; timers are keyed by
 *                    `timerKey(timer)`: setting one whose key is already pending replaces it;
 *                    `cancel-timer` drops the pending timer of that key (unknown keys are ignored);
 *  - `reply`       → answer the client request `reqId` (exactly once per client-request input, never
 *                    after a `client-gone` input for it).
 *
 * Stable API: fields are only ever added, never renamed.
 */
import type { EngineRequest, EngineResult, EvictedRun, Tokens } from "../engine.js";
import type { PeerIndex } from "../peer-index.js";
import type { Snapshot } from "../snapshot.js";
import type { MeshGossip } from "./gossip/summary.js";
import { type SwimMessage, type SwimTimer, swimTimerKey } from "./swim/types.js";

/** A node id: short printable string, unique in the cluster (validated by the config). */
export type NodeId = string;

/** Longest request id accepted from a peer (ids are stored in maps and echoed back). */
export const MAX_REQ_ID = 512;

/**
 * The error of a forward refused because it came without the prompt text while this node's engine
 * needs it (`needsPromptText`; e.g. the node restarted with another engine since its hello said
 * otherwise): the origin sends the text from then on and re-sends the forward at once.
 */
export const PROMPT_TEXT_NEEDED = "prompt text needed: this node's engine does not run from tokens alone";

/** Which (epoch, version) of some node's tree an estimate holds. */
export interface HeldVersion {
  epoch: number;
  version: number;
}

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

/** See `PeerMessage` "snapshot": the RTT echo. */
export interface SnapshotEcho {
  /** The receiver's own `at`, as it arrived here. */
  t: number;
  /** ms between its arrival here and this send (sender's clock). */
  heldMs: number;
}

/** Timing measured at the node that ran a request (travels back in a `result`). */
export interface ServedTiming {
  servedBy: NodeId;
  queueMs: number;
  prefillMs: number;
  decodeMs: number;
}

/**
 * Peer-to-peer messages.
 * - `snapshot`: the anti-entropy broadcast (also the heartbeat). `holds` is the ack: which (epoch,
 *   version) of the RECEIVER's tree the sender currently holds, so the receiver can answer next time
 *   with a delta from that base (or a heartbeat if nothing changed, or a full snapshot if it cannot).
 *   The snapshot header carries queue depth and push-back (§3.2). `blocks` is the number of block
 *   keys in the sender's tree at header.version: a receiver whose estimate holds that version but more
 *   keys (a wrong optimistic `updateTrieEstimate`) omits `holds` next time, which asks for a full.
 *   A transport MUST carry both fields when present: without `holds` the peer keeps sending full
 *   snapshots (correct, but costly).
 *   `at` + `echo` measure the RTT without a forward (cost-aware routing must re-learn a peer it
 *   stopped forwarding to): `echo.t` is the `at` of the last snapshot the sender received from the
 *   receiver and `echo.heldMs` how long ago (sender's clock) it received it, so the receiver computes
 *   RTT = now − t − heldMs entirely on its own clock. No clock sync needed. Optional, like `holds`.
 * - `forward`: a request routed here by `from`; `attempt` distinguishes retries of one reqId.
 *   `hops` counts forwards so far (1 for a direct forward); a node never forwards beyond `maxHops`.
 *   `deadlineMs` (optional) is the time budget left before the origin gives up on this attempt: a
 *   receiver that expects to finish it later answers a retryable error at once (fast fallback).
 *   A receiver that gets the same (reqId, attempt) again — the origin's probe for an overdue answer —
 *   does not run it twice: it acks again while the job waits or runs, and re-sends its answer if it
 *   has already sent one (a bounded number of recent answers is kept for this).
 * - `forward-ack`: the receiver accepted this forward (queued or started). Sent at once, before any
 *   engine work, so the origin tells a lost forward / unreachable peer from a slow answer within
 *   about one RTT instead of its whole forward timeout. `etaMs` (optional) is the receiver's estimate
 *   of how long until it answers (queue wait + service); the origin probes after that (see node.ts).
 *   Not sent for a refused or dropped forward (duplicate without a job, shutting down, overload:
 *   those answer `error` or nothing, as before).
 * - `cancel`: the origin moved this attempt on (timeout, suspicion, error): a receiver still holding
 *   it queued drops it and answers nothing; a started job finishes (its answer may still serve
 *   the request, late) unless the cancel is `final` (abort-runs.ts): then it may be aborted.
 *   Optional to handle: a peer that ignores it is still correct, it only wastes the work.
 * - `result` / `error`: the answer to a `forward`, echoing reqId + attempt.
 *   `retryable` errors (overload, engine failure) make the origin try its next candidate. A refusal
 *   of a forward that does not fit the receiver (its context or max_tokens ceiling) says `limits`.
 * - `goodbye`: the sender is leaving gracefully; peers stop routing to it at once.
 */
export type PeerMessage =
  | {
      type: "snapshot";
      snapshot: Snapshot;
      holds?: HeldVersion;
      blocks?: number;
      /** The sender's clock when it sent this (ms): echoed back so the sender can time a round trip. */
      at?: number;
      echo?: SnapshotEcho;
      /**
       * Requests the sender has served (for its own clients and for peers) in its current epoch. For
       * operators only (each member's share of the mesh's requests, the paper's Figure 3): the runtime
       * stamps and reads it, the node never does. Optional: older peers send none.
       */
      served?: number;
    }
  | {
      type: "forward";
      reqId: string;
      attempt: number;
      hops: number;
      request: EngineRequest;
      /** ms the origin will still wait for this attempt when it sends it (relative: no clock sync). */
      deadlineMs?: number;
      /**
       * With the origin's `maxWaitMs`: ms this attempt may still wait to START here (what is left of
       * the bound since the request was admitted, less a round trip); relative, like `deadlineMs`.
       */
      waitMs?: number;
    }
  /**
   * `queueDepth` (with `freshPeerLoad`): the sender's queue depth as it sends (peer-load.ts).
   * `epoch`: the sender's epoch as it acks, so a later restart of it fails over only the forwards an
   * older incarnation took (forward-attempts.ts `lostTo`). Optional: older peers send none.
   */
  | {
      type: "forward-ack";
      reqId: string;
      attempt: number;
      etaMs?: number;
      queueDepth?: number;
      epoch?: number;
    }
  /** `final`: the origin takes no answer for it any more (abort-runs.ts): a started run may be aborted. */
  | { type: "cancel"; reqId: string; attempt: number; final?: true }
  | {
      type: "result";
      reqId: string;
      attempt: number;
      result: EngineResult;
      timing: ServedTiming;
      queueDepth?: number;
    }
  | {
      type: "error";
      reqId: string;
      attempt: number;
      error: string;
      retryable: boolean;
      /** A refusal because the forward does not fit the sender: its limits (older peers send none). */
      limits?: ForwardLimits;
    }
  | { type: "goodbye" };

/**
 * What a forward must fit at the node serving it: its engine's context (prompt + maxTokens) and its
 * own max_tokens ceiling. Said with a refusal of a forward that exceeds them (peer-limits.ts).
 */
export interface ForwardLimits {
  contextTokens?: number;
  maxTokens?: number;
}

/**
 * `gossip: "scuttlebutt"`'s own traffic, apart from the request path: SWIM membership (swim/) and
 * Scuttlebutt anti-entropy (gossip/). Best effort, like a datagram; each has an exact encoded size
 * (swim/codec.ts, gossip/size.ts) so a runtime can carry it and the simulator counts its bytes.
 */
export type MeshMessage = { channel: "swim"; msg: SwimMessage } | { channel: "gossip"; msg: MeshGossip };

export type PeerMessageType = PeerMessage["type"];
/** The peer message of one type, e.g. `PeerMessageOf<"forward">`. */
export type PeerMessageOf<T extends PeerMessageType> = Extract<PeerMessage, { type: T }>;

/** Why a client is gone (`client-gone`): it hung up, or its deadline passed and it was answered 504. */
export type GoneReason = "hangup" | "deadline";

export type NodeInput =
  /** A client request arrived at this node (this node is its origin). */
  | { type: "client-request"; reqId: string; request: EngineRequest }
  /**
   * The client of request `reqId` hung up before its reply, or its deadline passed (`reason`, default
   * hangup; counted apart) (client-gone.ts): no reply is made for it from now on, and what it still
   * costs here or at a peer is dropped where it can be. Unknown or answered ids are ignored.
   */
  | { type: "client-gone"; reqId: string; reason?: GoneReason }
  | { type: "peer-message"; from: NodeId; msg: PeerMessage }
  | { type: "engine-done"; jobId: string; result: EngineResult }
  | { type: "engine-failed"; jobId: string; error: string }
  /**
   * The engine ended `jobId` early because the node asked (`abort-run`). What it kept cached of the
   * run: node-managed, `kept` leading tokens of the request's cache key (absent: none);
   * engine-managed, `sequences`, its whole cache now (absent: the next run says).
   */
  | { type: "engine-aborted"; jobId: string; kept?: number; sequences?: Tokens[] }
  | { type: "timer"; timer: Timer }
  /**
   * An engine-managed cache changed on its own (e.g. a server's KV events arrived): the node's tree
   * becomes `sequences` now, not at the next run, so the next snapshot already says so.
   */
  | { type: "engine-cache-changed"; sequences: Tokens[] }
  /** The transport could not deliver (connection refused / reset): suspect `to` at once. */
  | { type: "send-failed"; to: NodeId; msg?: PeerMessage; reason: string }
  /** A mesh message (gossip: "scuttlebutt") from `from`, who need not be a member yet (a joiner). */
  | { type: "mesh-message"; from: NodeId; msg: MeshMessage }
  /** The runtime's answer to `verify-member`: does `id` hold the cluster's credential? */
  | { type: "member-verified"; id: NodeId; ok: boolean; reason?: string }
  /** gossip "scuttlebutt": a seed found at run time (a `--join` address resolved to its id). */
  | { type: "mesh-seed"; id: NodeId };

export type ReplyOutcome =
  | { ok: true; result: EngineResult }
  /** `retryAfterMs`: an overloaded node's estimate of when it admits again (its queue's drain time). */
  | { ok: false; error: string; code: ReplyErrorCode; retryAfterMs?: number };

/**
 * `overloaded` → HTTP 429 (queue full), `engine` → 502/500, `invalid` → 400, `unserved` → 503 (no
 * reachable node serves the request's model), `deadline` → 429 (no node expected to answer within
 * the client's deadline; deadline.ts).
 */
export type ReplyErrorCode = "overloaded" | "engine" | "invalid" | "unserved" | "deadline";

export type Effect =
  | { type: "send"; to: NodeId; msg: PeerMessage }
  | {
      type: "engine-run";
      jobId: string;
      request: EngineRequest;
      /** node-managed engines: free these runs first (what the tree just evicted). */
      evicted: EvictedRun[];
      /**
       * node-managed engines: keep at most this many leading tokens of the request's cache key
       * (`keyTokens`: the prompt, behind its namespace's pseudo-block if it has one) cached afterwards.
       */
      cacheTokens: number;
    }
  /**
   * Abort the engine run of `jobId` (abort-runs.ts): nobody takes its answer. The engine's rejection
   * comes back as `engine-aborted`; a run that ends first comes back as `engine-done` as ever.
   */
  | { type: "abort-run"; jobId: string }
  | { type: "set-timer"; timer: Timer; delayMs: number }
  | { type: "cancel-timer"; timer: Timer }
  | { type: "reply"; reqId: string; outcome: ReplyOutcome; record: RequestRecord }
  /** gossip: "scuttlebutt": deliver a mesh message, best effort (loss is fine, no send-failed). */
  | { type: "mesh-send"; to: NodeId; msg: MeshMessage }
  /**
   * gossip: "scuttlebutt": check that `id` holds the cluster's credential (a certificate from the
   * cluster CA, or the shared secret) and feed back `member-verified`. Nobody joins without it.
   */
  | { type: "verify-member"; id: NodeId };

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
  refusals: number;
  /** Times its breaker opened. */
  opened: number;
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

export interface NodeOptions {
  /** Start epoch; default `deps.now()`. Must grow across restarts of the same id. */
  epoch?: number;
  /**
   * Also run the invariant checks that cost more than O(1) (walks of the tree and the queue, the
   * policy's order): the simulator's `checkInvariants` runs and the tests. The O(1) ones always run.
   */
  checkInvariants?: boolean;
}

/** Injected capabilities: the node has no clock or randomness of its own. */
export interface NodeDeps {
  /** Milliseconds, monotonic for this node (virtual time in the simulator). */
  now(): number;
  /** Uniform in [0, 1). */
  random(): number;
  /**
   * The full mesh's peer index for `maxOwners` owners (default: a new `PeerIndex`). The simulator's
   * oracle runs give one whose estimates share key sets across nodes (sim/shared-estimates.ts).
   */
  peerIndex?: (maxOwners: number) => PeerIndex;
}
