/**
 * What every fault component draws its schedule with: the schedule's own random stream and its
 * window, and values rounded (probabilities to 3 decimals, times to whole ms) so that the schedule as
 * printed is the schedule.
 */
import type { Prng } from "../../core/prng.js";

const round3 = (x: number): number => Math.round(x * 1000) / 1000;

export class FaultDraw {
  constructor(
    readonly rng: Prng,
    /** The window [0, durationMs) of virtual time the faults fall in. */
    readonly durationMs: number,
  ) {}

  /** Whole ms. */
  ms(x: number): number {
    return Math.round(x);
  }

  /** The end of a window that opens at `at` (< duration) and lasts `len`: within [at + 1, duration]. */
  endOf(at: number, len: number): number {
    return Math.max(at + 1, Math.min(this.ms(this.durationMs), at + this.ms(len)));
  }

  /** A probability in (0, max), or 0 (the class left out) with probability 1 - present. */
  prob(present: number, max: number): number {
    return this.rng.chance(present) ? Math.max(0.001, round3(this.rng.next() * max)) : 0;
  }
}

/** A fault list's node index must name one of the run's nodes. */
export function checkNode(what: string, node: number, nodes: number, bad: (m: string) => never): void {
  if (!Number.isInteger(node) || node < 0 || node >= nodes) bad(`${what} node ${node} out of range`);
}

/** A probability field must lie in [0, 1] when present. */
export function checkProb(what: string, p: number | undefined, bad: (m: string) => never): void {
  if (p !== undefined && !(p >= 0 && p <= 1)) bad(`${what} must be a probability in [0, 1], got ${p}`);
}

/** Per node index, its entries of a per-node fault list; undefined when the list is empty. */
export function byNode<T extends { node: number }>(
  n: number,
  list: readonly T[] | undefined,
): T[][] | undefined {
  if (list === undefined || list.length === 0) return undefined;
  const out = Array.from({ length: n }, (): T[] => []);
  for (const x of list) out[x.node]?.push(x);
  return out;
}
