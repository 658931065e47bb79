/**
 * The node protocol's vocabulary: what goes into a node (`NodeInput`), what comes out (`Effect`), the
 * messages peers exchange (`PeerMessage`) and what is recorded per request (`RequestRecord`). This
 * file holds the inputs and effects; the rest is in files by role, re-exported here: peer-messages.ts
 * (messages, ids, held versions), node-timers.ts, peer-view.ts (a peer as /cluster reads it, trust too),
 * node-stats.ts (request records, counters), node-deps.ts (start options, injected capabilities).
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
import type { RequestRecord } from "./node-stats.js";
import type { Timer } from "./node-timers.js";
import type { MeshMessage, NodeId, PeerMessage, RunFault } from "./peer-messages.js";

// The rest of the vocabulary lives in files by role; it is re-exported so callers import one module.
export type { NodeDeps, NodeOptions } from "./node-deps.js";
export type { NodeStats, RequestRecord } from "./node-stats.js";
export { type Timer, timerKey } from "./node-timers.js";
export {
  type ForwardLimits,
  type HeldVersion,
  MAX_REQ_ID,
  type MeshMessage,
  type NodeId,
  type PeerMessage,
  type PeerMessageOf,
  type PeerMessageType,
  PROMPT_TEXT_NEEDED,
  type RunFault,
  type ServedTiming,
  type SnapshotEcho,
} from "./peer-messages.js";
export type { BreakerState, DepartedTrustView, Liveness, PeerView, TrustView } from "./peer-view.js";

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
  /**
   * The engine failed `jobId`: `error`, its text for the client or peer; `fault`, whose fault
   * (peer-messages.ts `RunFault`; absent: `engine`); `retryAfterMs` (`load`): the engine's own wait.
   */
  | { type: "engine-failed"; jobId: string; error: string; fault?: RunFault; retryAfterMs?: number }
  /**
   * The engine ended `jobId` early because the node asked (`abort-run`). What it kept cached of the
   * run: node-managed, `kept` leading tokens of the request's cache key (absent: none);
   * engine-managed, `sequences`, its whole cache now (absent: the next run says).
   */
  | { type: "engine-aborted"; jobId: string; kept?: number; sequences?: Tokens[] }
  | { type: "timer"; timer: Timer }
  /** Output of request `reqId`'s forward streamed in from peer `from` and went to its client. */
  | { type: "forward-output"; reqId: string; from: NodeId }
  /**
   * An engine-managed cache changed on its own (e.g. a server's KV events arrived): the node's tree
   * becomes `sequences` now, not at the next run, so the next snapshot already says so.
   */
  | { type: "engine-cache-changed"; sequences: Tokens[] }
  /** The transport could not deliver (connection refused / reset): suspect `to` at once. */
  | { type: "send-failed"; to: NodeId; msg?: PeerMessage; reason: string }
  /** A mesh message (gossip: "scuttlebutt") from `from`, who need not be a member yet (a joiner). */
  | { type: "mesh-message"; from: NodeId; msg: MeshMessage }
  /**
   * The runtime's answer to `verify-member`: does `id` hold the cluster's credential? `incarnation`:
   * its SWIM incarnation as its own verified hello said (absent: a node before it, or the simulator).
   */
  | { type: "member-verified"; id: NodeId; ok: boolean; reason?: string; incarnation?: number }
  /** gossip "scuttlebutt": a seed found at run time (a `--join` address resolved to its id). */
  | { type: "mesh-seed"; id: NodeId };

export type ReplyOutcome =
  | { ok: true; result: EngineResult }
  /**
   * `retryAfterMs`: an overloaded node's estimate of when it admits again (its queue's drain time), or
   * (`unavailable`) the wait its engine asked for.
   */
  | { ok: false; error: string; code: ReplyErrorCode; retryAfterMs?: number };

/**
 * `overloaded` → HTTP 429 (queue full), `engine` → 502/500, `invalid` → 400, `unserved` → 503 (no
 * reachable node serves the request's model), `deadline` → 429 (no node expected to answer within
 * the client's deadline; deadline.ts), `unavailable` → 503 (our engine's rate limit or overload).
 */
export type ReplyErrorCode = "overloaded" | "engine" | "invalid" | "unserved" | "deadline" | "unavailable";

/** A failed run, as `engine-failed` says it. */
export type RunFailure = Pick<
  Extract<NodeInput, { type: "engine-failed" }>,
  "error" | "fault" | "retryAfterMs"
>;

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
