/**
 * Ping-reqs this node relays for others (owned by one ProbeCycle, probe-cycle.ts): our relay ping's
 * seq → the prober and its seq, so the target's ack (or our timeout's nack) goes back to it.
 * Bounded, since any peer can send ping-reqs.
 */
import type { NodeId } from "./types.js";

/** Ping-reqs relayed at once, at most (a peer-controlled count). */
const MAX_RELAYS = 1_024;

export interface Relay {
  origin: NodeId;
  originSeq: number;
}

export class Relays {
  private readonly pending = new Map<number, Relay>();

  get full(): boolean {
    return this.pending.size >= MAX_RELAYS;
  }
  open(seq: number, relay: Relay): void {
    this.pending.set(seq, relay);
  }
  /** The relay our ping `seq` is for, forgotten now (answered or timed out). */
  close(seq: number): Relay | undefined {
    const r = this.pending.get(seq);
    if (r !== undefined) this.pending.delete(seq);
    return r;
  }
}
