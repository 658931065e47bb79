/**
 * SWIM's round-robin probe order (owned by one ProbeCycle, probe-cycle.ts): members are probed in
 * turn over a shuffled list, reshuffled each pass, so every member is probed within one pass's
 * length (the paper's bound on time to first detection). Its own file: the order is one job, beside the
 * probing.
 */
import { shuffle } from "./members.js";
import type { NodeId } from "./types.js";

export class ProbeOrder {
  private order: NodeId[] = [];
  private next = 0;

  constructor(private readonly random: () => number) {}

  /** The next member to probe, skipping departed ones; a spent pass reshuffles `live` (undefined: none). */
  take(live: () => readonly NodeId[], isLive: (id: NodeId) => boolean): NodeId | undefined {
    for (let tries = 0; tries < 2; tries++) {
      while (this.next < this.order.length) {
        const id = this.order[this.next++] as NodeId;
        if (isLive(id)) return id;
      }
      this.order = shuffle([...live()], this.random);
      this.next = 0;
    }
    return undefined;
  }

  /** A new member probes late in this pass, not never: at a random place among those still due. */
  insert(id: NodeId): void {
    // A member back from the dead may still be due in this pass: once is enough.
    if (this.order.indexOf(id, this.next) >= 0) return;
    this.order.splice(this.next + Math.floor(this.random() * (this.order.length - this.next + 1)), 0, id);
  }
}
