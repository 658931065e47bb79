/**
 * Invariant checks for tests and `checkInvariants` runs (never in the fast path):
 *  - the node's tree equals its engine's cache after every engine step;
 *  - an estimate never moves back in (epoch, version);
 *  - after faults stop and the cluster settles, every estimate equals its owner's tree.
 */
import type { PrefixNode } from "../core/node/node.js";
import { isNewer } from "../core/snapshot.js";
import type { SimEngine } from "../engines/sim/sim-engine.js";

type Held = { epoch: number; version: number } | undefined;

export function checkTreeMirrorsEngine(
  now: number,
  id: string,
  node: PrefixNode,
  engine: SimEngine,
  out: string[],
): void {
  const tree = node.localTree();
  if (tree.size !== engine.cache.size) {
    out.push(`t=${now}: ${id} tree holds ${tree.size} tokens, engine cache ${engine.cache.size}`);
    return;
  }
  for (const seq of engine.cache.sequences()) {
    if (tree.match(seq) !== seq.length) {
      out.push(`t=${now}: ${id} engine caches a sequence of ${seq.length} tokens the tree lacks`);
      return;
    }
  }
}

export class EstimateWatch {
  constructor(private readonly out: string[]) {}

  check(now: number, at: string, of: string, before: Held, after: Held): void {
    if (before === undefined) return;
    if (after === undefined) {
      this.out.push(`t=${now}: ${at} lost its estimate of ${of}`);
      return;
    }
    if (isNewer(before, after)) {
      this.out.push(
        `t=${now}: ${at}'s estimate of ${of} regressed (${before.epoch},${before.version}) → (${after.epoch},${after.version})`,
      );
    }
  }
}

interface LiveNode {
  id: string;
  node: PrefixNode | null;
}

/**
 * Every live node's estimate of every live peer equals that peer's tree (block-granular); with
 * `heldOnly` (maxEstimates: a node holds some peers, not all), every estimate it holds does.
 */
export function checkConvergence(
  nodes: readonly LiveNode[],
  out: string[],
  expectConverged: boolean,
  heldOnly = false,
): void {
  if (!expectConverged) return;
  for (const a of nodes) {
    if (!a.node) continue;
    for (const b of nodes) {
      if (b === a || !b.node) continue;
      const held = a.node.heldOf(b.id);
      if (heldOnly && held === undefined) continue;
      const want = { epoch: b.node.currentEpoch, version: b.node.treeVersion() };
      if (!held || held.epoch !== want.epoch || held.version !== want.version) {
        out.push(
          `${a.id} holds ${b.id} at ${held ? `(${held.epoch},${held.version})` : "nothing"}, owner is at (${want.epoch},${want.version})`,
        );
        continue;
      }
      const index = a.node.peerIndex();
      const tree = b.node.localTree();
      const bs = index.blockSize;
      if (index.estimateSize(b.id) !== tree.blockCount * bs) {
        out.push(
          `${a.id}'s estimate of ${b.id} has ${index.estimateSize(b.id)} tokens, owner ${tree.blockCount * bs}`,
        );
        continue;
      }
      for (const seq of tree.sequences()) {
        const want = Math.floor(seq.length / bs) * bs;
        if (index.match(b.id, seq) !== want) {
          out.push(`${a.id}'s estimate of ${b.id} misses part of a cached sequence`);
          break;
        }
      }
    }
  }
}
