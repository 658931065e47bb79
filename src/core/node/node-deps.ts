/**
 * What a node is made with besides its config: start options (`NodeOptions`) and the capabilities it is
 * given (`NodeDeps`: clock, randomness, peer index). Part of the node vocabulary (types.ts).
 */
import type { PeerIndex } from "../peer-index.js";

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
