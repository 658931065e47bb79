/** How many turns a chat conversation has: the distributions `--turns` names, parsed and sampled. */
import type { Prng } from "../core/prng.js";

export type TurnDistribution =
  | { kind: "fixed"; turns: number }
  | { kind: "uniform"; min: number; max: number }
  /** 1 + Geometric, mean `mean`, truncated at MAX_TURNS. */
  | { kind: "geometric"; mean: number };

/** Most turns a conversation may have (a bound on what a caller controls). */
export const MAX_TURNS = 256;
export const DEFAULT_TURNS = "2-8";

/** `8` (fixed), `2-8` (uniform), `geo:5` (geometric, mean 5). */
export function parseTurns(spec: string): TurnDistribution {
  const s = spec.trim();
  const int = (x: string) => (/^\d+$/.test(x) ? Number(x) : Number.NaN);
  const inRange = (n: number) => Number.isInteger(n) && n >= 1 && n <= MAX_TURNS;
  let m: RegExpExecArray | null;
  if (/^\d+$/.test(s)) {
    const turns = int(s);
    if (!inRange(turns)) throw new RangeError(`turns must be in [1, ${MAX_TURNS}], got ${spec}`);
    return { kind: "fixed", turns };
  }
  m = /^(\d+)-(\d+)$/.exec(s);
  if (m) {
    const min = int(m[1]!);
    const max = int(m[2]!);
    if (!(inRange(min) && inRange(max) && min <= max))
      throw new RangeError(`turns range must be MIN-MAX with 1 ≤ MIN ≤ MAX ≤ ${MAX_TURNS}, got ${spec}`);
    return min === max ? { kind: "fixed", turns: min } : { kind: "uniform", min, max };
  }
  m = /^geo:(\d+(?:\.\d+)?)$/.exec(s);
  if (m) {
    const mean = Number(m[1]);
    if (!(mean >= 1 && mean <= MAX_TURNS / 4))
      throw new RangeError(`geometric mean turns must be in [1, ${MAX_TURNS / 4}], got ${spec}`);
    return { kind: "geometric", mean };
  }
  throw new RangeError(`turns must look like N, MIN-MAX or geo:MEAN (e.g. 8, 2-8, geo:5), got '${spec}'`);
}

export function describeTurns(d: TurnDistribution): string {
  if (d.kind === "fixed") return `${d.turns}`;
  if (d.kind === "uniform") return `uniform ${d.min}-${d.max}`;
  return `geometric mean ${d.mean} (≤ ${MAX_TURNS})`;
}

/** The distribution's exact mean (the geometric one truncated at MAX_TURNS). */
export function meanTurns(d: TurnDistribution): number {
  if (d.kind === "fixed") return d.turns;
  if (d.kind === "uniform") return (d.min + d.max) / 2;
  const q = 1 - 1 / d.mean;
  return q === 0 ? 1 : (1 - q ** MAX_TURNS) / (1 - q);
}

export function sampleTurns(d: TurnDistribution, rng: Prng): number {
  if (d.kind === "fixed") return d.turns;
  if (d.kind === "uniform") return d.min + rng.int(d.max - d.min + 1);
  if (d.mean === 1) return 1;
  // Inversion: P(n > k) = q^k; 1 - u lies in (0, 1], so the log is finite.
  const n = 1 + Math.floor(Math.log(1 - rng.next()) / Math.log(1 - 1 / d.mean));
  return Math.min(MAX_TURNS, n);
}
