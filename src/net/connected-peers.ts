/**
 * Which peers hold connections of ours, least recently used first, within a bound: a node of a large
 * mesh talks to a few members each round (gossip fan-out, probes, the holders of its estimates), and
 * over time to all of them, so connections kept open to everyone it ever spoke to would grow with N
 * (sockets, TLS sessions, forward channels). Past the bound the least recently used peers are
 * released (transport-client.ts closes their pools and idle channels; the next message reconnects).
 */
import { invariant } from "../core/invariant.js";

/** Peers kept connected at most, by default: every member of a mesh of up to this many + 1 nodes. */
export const DEFAULT_MAX_CONNECTED_PEERS = 128;

export class ConnectedPeers {
  /** Insertion order is recency: the first is the least recently used. */
  private readonly order = new Set<string>();

  constructor(readonly max: number) {
    invariant(Number.isInteger(max) && max >= 1, "connected peers: bad bound");
  }

  get size(): number {
    return this.order.size;
  }

  has(id: string): boolean {
    return this.order.has(id);
  }

  /**
   * `id` is used now. Returns the least recently used other peers past the bound, oldest first: the
   * caller releases those it can and `drop`s them (one it cannot release yet stays, and is offered
   * again next time).
   */
  use(id: string): string[] {
    this.order.delete(id);
    this.order.add(id);
    let excess = this.order.size - this.max;
    if (excess <= 0) return [];
    const over: string[] = [];
    for (const other of this.order) {
      if (excess === 0) break;
      if (other === id) continue;
      over.push(other);
      excess--;
    }
    return over;
  }

  drop(id: string): void {
    this.order.delete(id);
  }
}
