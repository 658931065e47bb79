/**
 * A read-only observer the simulator calls every `everyMs` of virtual time with each node's live
 * PrefixNode (null while crashed). It only reads (heldOf, treeVersion, peers…): the nodes receive no
 * input from it, so a probed run makes exactly the same node decisions as an unprobed one. The scale
 * experiment times convergence and failure detection with it.
 */
import type { PrefixNode } from "../core/node/node.js";

export interface SimProbe {
  /** Period of the observation, virtual ms (> 0). */
  everyMs: number;
  /** First observation at this virtual time (default everyMs). */
  fromMs?: number;
  observe(now: number, nodes: readonly (PrefixNode | null)[]): void;
}
