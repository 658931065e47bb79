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

/** An owner's state as a peer was last made to see it (immutable: one object serves every peer). */
export interface Pushed {
  epoch: number;
  version: number;
  queueDepth: number;
  pushBackMs: number;
}

export function stateOf(n: PrefixNode): Pushed {
  return {
    epoch: n.currentEpoch,
    version: n.localTree().version,
    // What the node itself would report: a perfect estimate is of what it tells peers.
    queueDepth: n.reportedDepth(),
    pushBackMs: n.currentPushBackMs(),
  };
}

function same(a: Pushed | SnapshotHeader | undefined, b: Pushed): boolean {
  return (
    a !== undefined &&
    a.epoch === b.epoch &&
    a.version === b.version &&
    a.queueDepth === b.queueDepth &&
    a.pushBackMs === b.pushBackMs
  );
}

/**
 * One owner's refreshes at one moment: the header and each delta are built once and shared by every
 * peer that needs them (snapshots are immutable), as an anti-entropy round shares them.
 */
export class OwnerRefresh {
  private header: SnapshotHeader | undefined;
  private full: Snapshot | undefined;
  private readonly deltas = new Map<number, Snapshot | null>();

  constructor(
    readonly from: PrefixNode,
    readonly state: Pushed,
  ) {}

  /** The message that brings `to`'s estimate of the owner to its state exactly. */
  messageFor(to: PrefixNode): PeerMessage {
    const from = this.from;
    const now = this.state;
    const tree = from.localTree();
    this.header ??= {
      sender: from.id,
      epoch: now.epoch,
      version: now.version,
      tokenCount: tree.size,
      capacity: tree.capacity,
      queueDepth: now.queueDepth,
      pushBackMs: now.pushBackMs,
    };
    const header = this.header;
    const held = to.heldOf(from.id);
    let snapshot: Snapshot | undefined;
    if (held !== undefined && held.epoch === now.epoch) {
      if (held.version === now.version) snapshot = { kind: "heartbeat", header };
      else if (held.version < now.version) {
        let d = this.deltas.get(held.version);
        if (d === undefined) {
          const delta = tree.changesSince(held.version);
          d = delta ? { kind: "delta", header, delta } : null;
          this.deltas.set(held.version, d);
        }
        if (d) snapshot = d;
      }
    }
    if (!snapshot) {
      this.full ??= { kind: "full", header, body: tree.snapshotBody() };
      snapshot = this.full;
    }
    const msg: PeerMessage = { type: "snapshot", snapshot, blocks: tree.blockCount };
    const holds = from.heldOf(to.id);
    if (holds) msg.holds = holds;
    return msg;
  }
}

export class Oracle {
  /** Per (owner, peer), at owner × N + peer: the owner's state that peer was last made to see. */
  private readonly pushed: (Pushed | undefined)[];
  /**
   * Per owner, its state when every peer last saw it exactly (set only by a complete pass): an
   * unchanged owner needs no per-peer check (N² checks per event made 16-node runs ten times slower).
   */
  private readonly seen: (Pushed | undefined)[];
  /**
   * Per owner, the peers a real snapshot may have shown older figures since (`afterReal`): only
   * those pairs need a refresh while the owner is unchanged. Re-checking every peer of the sender
   * after every real snapshot made the full mesh's N² heartbeats cost N³ per Δpoll.
   */
  private readonly dirty: number[][];
  /**
   * Nodes (by index) whose state may differ from what every peer saw: only they are checked after
   * an event. A node's state (epoch, tree version, queue, push-back) changes only when it handles an
   * input (`touch`), and what its peers saw is forgotten only by `afterReal` and `reset`. The one
   * exception: with offload, a held engine's reported depth grows with time alone (executor.ts
   * `reportedDepth`), so its peers see it as of its last input or refresh, up to a Δpoll old.
   */
  private readonly marked: Uint8Array;
  private readonly list: number[] = [];
  private readonly posOf: Int32Array;
  private readonly n: number;

  /**
   * `exhaustive`: the naive reference (tests): every node is checked against every peer after every
   * event, with no shortcut; the refreshes it makes are the ones the shortcuts must make.
   */
  constructor(
    nodes: number,
    readonly exhaustive = false,
  ) {
    this.n = nodes;
    this.pushed = new Array<Pushed | undefined>(nodes * nodes).fill(undefined);
    this.seen = new Array<Pushed | undefined>(nodes).fill(undefined);
    this.dirty = Array.from({ length: nodes }, () => []);
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
    if (this.exhaustive) return after + 1 < this.n ? after + 1 : -1;
    if (this.list.length > 64) {
      for (let i = after + 1; i < this.marked.length; i++) if (this.marked[i] === 1) return i;
      return -1;
    }
    let best = -1;
    for (const i of this.list) if (i > after && (best < 0 || i < best)) best = i;
    return best;
  }

  /**
   * A real snapshot from → to (node indices; `owner`: the sender now, null if it crashed since) is
   * about to be handled. One whose header is the owner's state now puts nothing untrue in place, so
   * nothing needs pushing after it; one with older figures does (the receiver then sees them).
   */
  afterReal(fromIdx: number, toIdx: number, header: SnapshotHeader, owner: PrefixNode | null): void {
    if (owner !== null && !this.exhaustive && same(header, stateOf(owner))) return;
    this.pushed[fromIdx * this.n + toIdx] = undefined;
    (this.dirty[fromIdx] as number[]).push(toIdx);
    this.touch(fromIdx);
  }

  /**
   * Node `j` (re)started: everyone's view of everyone is checked again, and `j`, which holds no
   * estimate any more, is sent every owner's state (else an unchanged owner reached it only with its
   * next real snapshot).
   */
  reset(j: number): void {
    for (let i = 0; i < this.n; i++) this.pushed[i * this.n + j] = undefined;
    this.seen.fill(undefined);
    for (let i = 0; i < this.marked.length; i++) this.touch(i);
  }

  /**
   * The peers (ascending) that may not see owner `i` (in state `now`) exactly: every peer if its
   * state moved since its last complete pass, else those a real snapshot reached since.
   */
  peersToCheck(i: number, now: Pushed): number[] | "all" {
    if (this.exhaustive || !same(this.seen[i], now)) return "all";
    const d = this.dirty[i] as number[];
    if (d.length > 1) d.sort((x, y) => x - y);
    return d;
  }

  /** A pass over owner `i`'s peers ended; `complete`: every peer now sees it as `now`. */
  passed(i: number, now: Pushed, complete: boolean): void {
    // An incomplete pass (a peer paused) leaves `seen` unset: the next one checks every peer again.
    this.seen[i] = complete ? now : undefined;
    (this.dirty[i] as number[]).length = 0;
  }

  /** Whether peer `j` must be sent owner `i`'s state `now` (and records that it is). */
  take(i: number, j: number, now: Pushed): boolean {
    const k = i * this.n + j;
    if (same(this.pushed[k], now)) return false;
    this.pushed[k] = now;
    return true;
  }
}
