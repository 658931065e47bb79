/** What the compare report's sections share: a run with its result, one policy's result in a cell, number formats. */
import type { CompareResult } from "./execute.js";
import type { CompareRun } from "./grid.js";

export type Row = { run: CompareRun; result: CompareResult };

/** `policy`'s result among a cell's rows (undefined: not run there). */
export const resultOf = (cell: readonly Row[], policy: string): CompareResult | undefined =>
  cell.find((r) => r.run.policy === policy)?.result;

export const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
export const s3 = (x: number) => x.toFixed(3);
