/**
 * What anti-entropy ships (paper §3.4): a node's cache summary, as a full body, a delta against a
 * version the receiver holds, or a heartbeat when nothing changed.
 *
 * The body is the set of chained block keys of the sender's exact tree (see block-hash.ts): keys name
 * whole prefixes, so a set is a complete, structure-free description of a prefix tree at block
 * granularity, and deltas are just keys added and removed. Why not token runs: ARCHITECTURE.md
 * ("Snapshot codec"); the measurements are in BENCHMARKS.md ("Core data structures").
 */

/** Longest sender id, in UTF-8 bytes. */
export const MAX_SENDER_BYTES = 64;

export interface SnapshotHeader {
  /** Node id (≤ MAX_SENDER_BYTES bytes of UTF-8). */
  sender: string;
  /** New after every restart (the node's start time in ms, injected clock); orders incarnations. */
  epoch: number;
  /** Per-sender, per-epoch, monotonically increasing: the sender tree's version. */
  version: number;
  /** Tokens in the sender's exact tree (token-exact, unlike the block-granular body). */
  tokenCount: number;
  capacity: number;
  /** Filled by the protocol. */
  queueDepth: number;
  /** 0 = none; else "do not route to me for this many ms from receipt" (relative: clocks differ). */
  pushBackMs: number;
  /**
   * The sender's engine costs as it measured them (calibration + its own runs; engine-costs.ts), so a
   * receiver knows each peer's speed. Optional: absent in the paper's setting and from older senders.
   */
  costs?: EngineCosts;
  /**
   * gossip "scuttlebutt": requests the sender has served in this epoch, stamped by the daemon's runtime
   * on its own states (the full mesh's rides on the message instead). Operators only: never routed on.
   */
  served?: number;
}

/** An engine's cost model: run time ≈ fixed + per uncached + per cached prompt token + per output token. */
export interface EngineCosts {
  fixedMs: number;
  msPerUncached: number;
  msPerCached: number;
  msPerOutput: number;
}

/** Largest value of any cost field accepted from a peer (ms): beyond it the header is malformed. */
export const MAX_COST_MS = 600_000;

/** Immutable: never mutated after it is handed out. */
export interface SnapshotBody {
  readonly blockSize: number;
  /** Chained block keys (48-bit integers), one per full block of every cached prefix; no order implied. */
  readonly keys: Float64Array;
}

/** Changes between two versions of one sender's tree, netted: a key is in at most one list. */
export interface SnapshotDelta {
  readonly baseVersion: number;
  readonly version: number;
  readonly added: Float64Array;
  readonly removed: Float64Array;
}

export type Snapshot =
  | { kind: "full"; header: SnapshotHeader; body: SnapshotBody }
  | { kind: "delta"; header: SnapshotHeader; delta: SnapshotDelta }
  | { kind: "heartbeat"; header: SnapshotHeader };

/** Lexicographic (epoch, version): a later incarnation beats any version of an earlier one. */
export function isNewer(
  a: { epoch: number; version: number },
  b: { epoch: number; version: number },
): boolean {
  return a.epoch > b.epoch || (a.epoch === b.epoch && a.version > b.version);
}
