/**
 * Our own state as the gossip role reads it (owned by one GossipAntiEntropy,
 * ../gossip-anti-entropy.ts), kept while nothing in it moved. Apart so that the caching rule (what
 * counts as a change) sits in one place next to the header it builds.
 */
import type { SnapshotHeader } from "../../snapshot.js";
import type { OwnTree } from "../anti-entropy.js";
import type { NodeId } from "../types.js";
import type { OwnState } from "./states.js";
import type { OwnSummary } from "./summary.js";

export class OwnStateCache {
  /** The last state and the tree it reads. */
  private state: OwnState | undefined;
  private tree: OwnTree | undefined;

  constructor(private readonly selfId: NodeId) {}

  /**
   * Our state at `epoch`. Kept while nothing in it moved (a header travels inside the states we send,
   * so a changed one is a new object, never an edit): one per gossip message was a header and four
   * closures of garbage each time. `summary`, when discovery is bound, is refreshed with a new state.
   */
  get(
    epoch: number,
    tree: OwnTree,
    queueDepth: number,
    pushBackMs: number,
    summary: OwnSummary | undefined,
  ): OwnState {
    const o = this.state;
    const h = o?.header();
    if (
      o !== undefined &&
      h !== undefined &&
      this.tree === tree &&
      h.epoch === epoch &&
      h.version === tree.version &&
      h.tokenCount === tree.size &&
      h.capacity === tree.capacity &&
      h.queueDepth === queueDepth &&
      h.pushBackMs === pushBackMs
    )
      return o;
    const header: SnapshotHeader = {
      sender: this.selfId,
      epoch,
      version: tree.version,
      tokenCount: tree.size,
      capacity: tree.capacity,
      queueDepth,
      pushBackMs,
    };
    this.tree = tree;
    summary?.refresh(tree);
    this.state = {
      header: () => header,
      blocks: () => tree.blockCount,
      changesSince: (v) => tree.changesSince(v),
      snapshotBody: () => tree.snapshotBody(),
    };
    return this.state;
  }
}
