/**
 * The messages peers exchange (`PeerMessage`, `MeshMessage`) and what they carry: node ids, held
 * versions, the RTT echo, served timing, forward limits. Part of the node vocabulary (types.ts).
 */
import type { EngineRequest, EngineResult } from "../engine.js";
import type { Snapshot } from "../snapshot.js";
import type { MeshGossip } from "./gossip/summary.js";
import type { SwimMessage } from "./swim/types.js";

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

/**
 * Whose fault a failed engine run is, as the runtime read its engine's error (`engine-failed`, and a
 * forward's `error`): `input`, the request's (the engine refused the prompt: a 400 from a local
 * run; from a peer, the request falls back, and the last engine asked answers); `load`, the
 * engine's rate limit or overload, for now (a 503; a forward falls back); `engine`, any other
 * failure (a 502). Absent: `engine`.
 */
export type RunFault = "input" | "load" | "engine";

/** Which (epoch, version) of some node's tree an estimate holds. */
export interface HeldVersion {
  epoch: number;
  version: number;
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
 *   of a forward that does not fit the receiver (its context or max_tokens ceiling) says `limits`;
 *   a failed run says its `fault` (a back-off, not a failure mark, for `input` and `load`).
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
      /** A failed run: whose fault (older peers send none: read as `engine`). */
      fault?: RunFault;
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
