/**
 * Oracle mode's driver (oracle.ts): after a node handles an input, every estimate of an owner that
 * may have changed is refreshed, until none may. A refresh is handled by its receiver, which may
 * change in turn: the refreshes it causes are taken by the pass already running, never by a nested one.
 */
import type { PeerMessage } from "../core/node/types.js";
import { type Oracle, OwnerRefresh, stateOf } from "./oracle.js";
import type { SimNodeState } from "./run-state.js";

export class OracleSync {
  private busy = false;

  constructor(
    private readonly oracle: Oracle,
    private readonly nodes: readonly SimNodeState[],
    /** Node `j` is paused now (refreshed once it resumes). */
    private readonly paused: (j: number) => boolean,
    /** Hands `dest` the refresh `msg` of owner `from` (as a snapshot it received). */
    private readonly deliver: (dest: SimNodeState, from: string, msg: PeerMessage) => void,
  ) {}

  /** Node `idx` handled an input: its estimates are brought up to date (unless a pass runs). */
  touched(idx: number): void {
    this.oracle.touch(idx);
    if (!this.busy) this.sync();
  }

  /**
   * Refresh every estimate of an owner that may have changed, until none may. An owner whose state
   * is what every unpaused peer last saw costs nothing per event, and one a real snapshot reached
   * only that peer.
   */
  private sync(): void {
    const { oracle, nodes } = this;
    const N = nodes.length;
    this.busy = true;
    try {
      for (let changed = true; changed; ) {
        changed = false;
        // In index order, as a pass over every node did: the same refreshes in the same order.
        for (let i = oracle.next(-1); i >= 0; i = oracle.next(i)) {
          const a = nodes[i] as SimNodeState;
          const owner = a.node;
          if (!owner) {
            oracle.settle(i);
            continue;
          }
          const state = stateOf(owner);
          const peers = oracle.peersToCheck(i, state);
          if (peers !== "all" && peers.length === 0) {
            oracle.settle(i);
            continue;
          }
          const pass = new OwnerRefresh(owner, state);
          let complete = true;
          const count = peers === "all" ? N : peers.length;
          for (let k = 0; k < count; k++) {
            const j = peers === "all" ? k : (peers[k] as number);
            const b = nodes[j] as SimNodeState;
            if (a === b || !b.node) continue;
            if (this.paused(j)) {
              complete = false; // refreshed once it resumes
              continue;
            }
            if (!oracle.take(i, j, state)) continue;
            changed = true;
            this.deliver(b, a.id, pass.messageFor(b.node));
          }
          oracle.passed(i, state, complete);
          if (complete) oracle.settle(i);
        }
      }
    } finally {
      this.busy = false;
    }
  }
}
