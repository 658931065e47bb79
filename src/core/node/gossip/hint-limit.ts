/**
 * A per-sender bound on hints messages (type 7): a token bucket each. Without it one member could
 * flush every node's hint index and relay queue and steer seeks at will. An honest member sends at
 * most one relay per Δpoll / 16 plus one with each round, so that rate (with a burst of twice it)
 * never drops an honest sender's message; the excess is dropped and counted.
 */
type NodeId = string;

interface Bucket {
  tokens: number;
  at: number;
}

export class HintLimit {
  private readonly buckets = new Map<NodeId, Bucket>();
  /** Messages refused since the last reset. */
  dropped = 0;
  private readonly burst: number;

  /** `perPoll` messages a sender may send each `pollMs`. */
  constructor(
    private readonly perPoll: number,
    private readonly pollMs: number,
  ) {
    this.burst = 2 * perPoll;
  }

  /** May a hints message from `from` at `now` be taken (and is it counted against it)? */
  allow(from: NodeId, now: number): boolean {
    let b = this.buckets.get(from);
    if (b === undefined) {
      b = { tokens: this.burst, at: now };
      this.buckets.set(from, b);
    } else {
      b.tokens = Math.min(this.burst, b.tokens + (Math.max(0, now - b.at) * this.perPoll) / this.pollMs);
      b.at = now;
    }
    if (b.tokens < 1) {
      this.dropped++;
      return false;
    }
    b.tokens -= 1;
    return true;
  }

  /** A member gone: its bucket with it (so buckets stay bounded by the members). */
  remove(from: NodeId): void {
    this.buckets.delete(from);
  }
}
