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

function stateOf(n: PrefixNode): Pushed {
  return {
    epoch: n.currentEpoch,
    version: n.localTree().version,
    queueDepth: n.queueDepth(),
    pushBackMs: n.currentPushBackMs(),
  };
}

function same(a: Pushed | undefined, b: Pushed): boolean {
  return (
    a !== undefined &&
    a.epoch === b.epoch &&
    a.version === b.version &&
    a.queueDepth === b.queueDepth &&
    a.pushBackMs === b.pushBackMs
  );
}

export class Oracle {
  private readonly pushed = new Map<string, Pushed>();
  /**
   * Per node, its state when every peer last saw it exactly (`synced`): an unchanged node needs no
   * per-peer check (N² checks per event made 16-node oracle runs ten times slower).
   */
  private readonly seen = new Map<string, Pushed>();

  /** A real message from → to was just handled: it may have put older header figures in place. */
  invalidate(from: string, to: string): void {
    this.pushed.delete(`${from}>${to}`);
    this.seen.delete(from);
  }

  /** A node (re)started: everyone's view of everyone is checked again. */
  reset(): void {
    this.seen.clear();
  }

  /** Whether some peer may not see `from` exactly as it is now. */
  mayNeedRefresh(from: PrefixNode): boolean {
    return !same(this.seen.get(from.id), stateOf(from));
  }

  /** Every peer now sees `from` exactly as it is. */
  synced(from: PrefixNode): void {
    this.seen.set(from.id, stateOf(from));
  }

  /** The refresh `to` needs to see `from` exactly as it is now, or undefined if it already does. */
  refresh(from: PrefixNode, to: PrefixNode): PeerMessage | undefined {
    const key = `${from.id}>${to.id}`;
    const tree = from.localTree();
    const now = stateOf(from);
    if (same(this.pushed.get(key), now)) return undefined;
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
