/**
 * The simulated network: per message, one-way delay = Δcomm + uniform jitter in [-j, +j] (never below
 * 0), plus the injected faults — loss, duplication, reordering (an extra random delay), and
 * partitions that heal. Crashed receivers are handled by the runner (delivery to a dead incarnation
 * is dropped). All randomness comes from one seeded stream.
 */
import type { Prng } from "../core/prng.js";
import type { NetworkFaults } from "./faults/network.js";

export class SimNetwork {
  private readonly groupOf: ((now: number, node: number) => number)[] = [];

  constructor(
    private readonly rng: Prng,
    private readonly commMs: number,
    private readonly jitterMs: number,
    private readonly faults: NetworkFaults = {},
  ) {
    for (const p of faults.partitions ?? []) {
      const map = new Map<number, number>();
      p.groups.forEach((g, gi) => {
        for (const n of g) map.set(n, gi);
      });
      this.groupOf.push((now, node) =>
        now >= p.startMs && now < p.endMs ? (map.get(node) ?? -1 - node) : 0,
      );
    }
  }

  /** True if a partition separates a and b at `now`. */
  partitioned(now: number, a: number, b: number): boolean {
    for (const g of this.groupOf) if (g(now, a) !== g(now, b)) return true;
    return false;
  }

  /**
   * Delivery delays for one message sent at `now` from a to b, written to `out` (reused, no
   * allocation in the hot path). Returns how many copies arrive: 0 = lost, 2 = duplicated.
   */
  delays(now: number, a: number, b: number, out: number[]): number {
    if (this.groupOf.length > 0 && this.partitioned(now, a, b)) return 0;
    const f = this.faults;
    const linkFaults = f.untilMs === undefined || now < f.untilMs;
    if (linkFaults && f.lossProb && this.rng.chance(f.lossProb)) return 0;
    out[0] = this.oneDelay(linkFaults);
    if (linkFaults && f.dupProb && this.rng.chance(f.dupProb)) {
      out[1] = this.oneDelay(linkFaults);
      return 2;
    }
    return 1;
  }

  private oneDelay(linkFaults: boolean): number {
    let d = this.commMs;
    if (this.jitterMs > 0) d += this.jitterMs * (2 * this.rng.next() - 1);
    const f = this.faults;
    if (linkFaults && f.reorderProb && this.rng.chance(f.reorderProb))
      d += this.rng.next() * (f.reorderMaxMs ?? 10 * (this.commMs + 1));
    return Math.max(d, 0);
  }
}
