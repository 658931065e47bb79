/** The scale report's number formats and lookups into a ScaleOutcome, shared by its parts. */
import type { NodeCell } from "./execute.js";
import type { ScaleOutcome } from "./run.js";

export const mark = (ok: boolean) => (ok ? "met" : "**not met**");
export const f = (x: number | undefined, d = 1) =>
  x === undefined || !Number.isFinite(x) ? "—" : x.toFixed(d);
export const s = (ms: number | undefined) => (ms === undefined ? "not reached" : (ms / 1000).toFixed(2));
export const pct = (x: number | undefined) => (x === undefined ? "—" : `${(100 * x).toFixed(1)}%`);
export const median = (xs: number[]) => {
  if (xs.length === 0) return undefined;
  const v = [...xs].sort((a, b) => a - b);
  return v[Math.floor((v.length - 1) / 2)];
};

export function cell(o: ScaleOutcome, kind: NodeCell["kind"], mode: string, n: number): NodeCell | undefined {
  return o.cells.find((c) => c.kind === kind && c.mode === mode && c.nodes === n);
}

export function skipReason(
  o: ScaleOutcome,
  kind: NodeCell["kind"],
  mode: string,
  n: number,
): string | undefined {
  return o.skipped.find((c) => c.kind === kind && c.mode === mode && c.nodes === n)?.reason;
}

/** Median over the tracked changes of the time to reach a share; undefined if any did not reach it. */
export function spreadMs(c: NodeCell, k: "p50Ms" | "p99Ms" | "p100Ms"): number | undefined {
  const done = c.spreads.filter((x) => x.changedAtMs !== undefined);
  if (done.length === 0 || done.some((x) => x[k] === undefined)) return undefined;
  return median(done.map((x) => x[k] as number));
}
