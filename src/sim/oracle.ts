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
   * Nodes (by index) whose state may differ from what every peer saw: only they are checked after
   * an event. A node's state (epoch, tree version, queue, push-back) changes only when it handles an
   * input (`touch`), and what its peers saw is forgotten only by `invalidate` and `reset`; checking
   * every node after every event grew as N per event, N² per simulated second on the full mesh.
   */
  private readonly marked: Uint8Array;
  private readonly list: number[] = [];
  private readonly posOf: Int32Array;

  constructor(nodes: number) {
    this.marked = new Uint8Array(nodes);
    this.posOf = new Int32Array(nodes).fill(-1);
  }

  /** Node `i` handled an input: its state may have changed. */
  touch(i: number): void {
    if (this.marked[i] === 1) return;
    this.marked[i] = 1;
    this.posOf[i] = this.list.length;
    this.list.push(i);
  }

  /** Node `i` needs no refresh (checked, or crashed: a restart resets everything). */
  settle(i: number): void {
    if (this.marked[i] !== 1) return;
    this.marked[i] = 0;
    const at = this.posOf[i] as number;
    const last = this.list.pop() as number;
    if (last !== i) {
      this.list[at] = last;
      this.posOf[last] = at;
    }
    this.posOf[i] = -1;
  }

  /** The lowest index above `after` that may need a refresh, or -1: nodes are refreshed in index order. */
  next(after: number): number {
    if (this.list.length > 64) {
      for (let i = after + 1; i < this.marked.length; i++) if (this.marked[i] === 1) return i;
      return -1;
    }
    let best = -1;
    for (const i of this.list) if (i > after && (best < 0 || i < best)) best = i;
    return best;
  }

  /**
   * Per node, its state when every peer last saw it exactly (`synced`): an unchanged node needs no
   * per-peer check (N² checks per event made 16-node oracle runs ten times slower).
   */
  private readonly seen = new Map<string, Pushed>();

  /** A real message from → to (`from` is node `fromIdx`) is about to be handled: it may put older header figures in place. */
  invalidate(from: string, to: string, fromIdx: number): void {
    this.pushed.delete(`${from}>${to}`);
    this.seen.delete(from);
    this.touch(fromIdx);
  }

  /** A node (re)started: everyone's view of everyone is checked again. */
  reset(): void {
    this.seen.clear();
    for (let i = 0; i < this.marked.length; i++) this.touch(i);
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
