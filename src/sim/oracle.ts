/**
 * The perfectly informed reference — SIMULATION ONLY, not a deployable policy. With `oracle: true`
 * every node's estimate of every peer is brought to the owner's TRUE tree, queue depth and push-back
 * the instant they change, free of charge (no delay, no loss, not counted as traffic). Any policy
 * then routes as if anti-entropy were perfect, so a report can show how much of a perfectly informed
 * router's hit rate each real policy reaches.
 *
 * It uses the nodes' ordinary snapshot path (a heartbeat, delta or full snapshot built from the
 * owner's tree, with the owner's true ack), so estimates keep every protocol invariant. No `at` /
 * `echo`: the oracle must not teach anyone an RTT.
 */
import type { PrefixNode } from "../core/node/node.js";
import type { PeerMessage } from "../core/node/types.js";
import type { Snapshot, SnapshotHeader } from "../core/snapshot.js";

interface Pushed {
  epoch: number;
  version: number;
  queueDepth: number;
  pushBackMs: number;
}

export class Oracle {
  private readonly pushed = new Map<string, Pushed>();

  /** A real message from → to was just handled: it may have put older header figures in place. */
  invalidate(from: string, to: string): void {
    this.pushed.delete(`${from}>${to}`);
  }

  /** The refresh `to` needs to see `from` exactly as it is now, or undefined if it already does. */
  refresh(from: PrefixNode, to: PrefixNode): PeerMessage | undefined {
    const key = `${from.id}>${to.id}`;
    const tree = from.localTree();
    const now: Pushed = {
      epoch: from.currentEpoch,
      version: tree.version,
      queueDepth: from.queueDepth(),
      pushBackMs: from.currentPushBackMs(),
    };
    const last = this.pushed.get(key);
    if (
      last !== undefined &&
      last.epoch === now.epoch &&
      last.version === now.version &&
      last.queueDepth === now.queueDepth &&
      last.pushBackMs === now.pushBackMs
    )
      return undefined;
    this.pushed.set(key, now);
    const header: SnapshotHeader = {
      sender: from.id,
      epoch: now.epoch,
      version: now.version,
      tokenCount: tree.size,
      capacity: tree.capacity,
      queueDepth: now.queueDepth,
      pushBackMs: now.pushBackMs,
    };
    const held = to.heldOf(from.id);
    let snapshot: Snapshot | undefined;
    if (held !== undefined && held.epoch === now.epoch) {
      if (held.version === now.version) snapshot = { kind: "heartbeat", header };
      else if (held.version < now.version) {
        const delta = tree.changesSince(held.version);
        if (delta) snapshot = { kind: "delta", header, delta };
      }
    }
    snapshot ??= { kind: "full", header, body: tree.snapshotBody() };
    const msg: PeerMessage = { type: "snapshot", snapshot, blocks: tree.blockCount };
    const holds = from.heldOf(to.id);
    if (holds) msg.holds = holds;
    return msg;
  }
}
