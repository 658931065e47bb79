/**
 * The scale grid's budget rule, pure: a series' measured (N, cost) points project the cost of its
 * next N, and a run projected past the budget is not started. Kept apart from running cells so the
 * rule can be tested with injected figures.
 */

/** One measured run of a series: N and its cost. */
export interface Measured {
  n: number;
  v: number;
}

/** Measured (N, cost) points of one series → the cost projected at N: the last growth exponent (2 if unknown). */
export function project(points: readonly Measured[], n: number): { value: number; exponent: number } {
  const last = points[points.length - 1];
  if (!last) return { value: 0, exponent: 2 };
  const prev = points[points.length - 2];
  const exponent =
    prev && prev.v > 0 && last.v > 0 ? Math.max(1, Math.log(last.v / prev.v) / Math.log(last.n / prev.n)) : 2;
  return { value: last.v * (n / last.n) ** exponent, exponent };
}

/** A run not to start: its projected cost, the growth it assumed and the measured point it came from. */
export interface OverBudget {
  projected: number;
  exponent: number;
  last: Measured;
}

/**
 * Whether the run at N is over budget: its projected cost × `scale` (a longer window than the
 * points were measured per) past `budget`. A series with nothing measured yet always runs.
 */
export function overBudget(
  points: readonly Measured[],
  n: number,
  budget: number,
  scale = 1,
): OverBudget | undefined {
  const last = points[points.length - 1];
  if (!last) return undefined;
  const p = project(points, n);
  const projected = p.value * scale;
  return projected > budget ? { projected, exponent: p.exponent, last } : undefined;
}

/** What one run cost: CPU time (user + system of this process during it) and wall time, s. */
export interface RunCost {
  n: number;
  cpuS: number;
  wallS: number;
}

/** A run not to start by CPU, with the wall time measured beside the last CPU point (reported only). */
export interface OverCpuBudget extends OverBudget {
  lastWallS: number;
}

/**
 * The grid's time budget: CPU seconds only. Wall time on a shared machine grows with other jobs'
 * load, so projecting it made the grid's choices depend on the machine's load, not on the code.
 */
export function overCpuBudget(
  points: readonly RunCost[],
  n: number,
  budgetCpuS: number,
  scale = 1,
): OverCpuBudget | undefined {
  const over = overBudget(
    points.map((p) => ({ n: p.n, v: p.cpuS })),
    n,
    budgetCpuS,
    scale,
  );
  const last = points[points.length - 1];
  return over && last ? { ...over, lastWallS: last.wallS } : undefined;
}

/** The report's line for a run skipped by CPU: the projection and the figures it came from. */
export function cpuSkipReason(over: OverCpuBudget, budgetCpuS: number, per = ""): string {
  return `projected ${over.projected.toFixed(0)} s CPU > budget ${budgetCpuS} s CPU (measured ${over.last.v.toFixed(1)} s CPU, ${over.lastWallS.toFixed(1)} s wall${per} at ${over.last.n} nodes, growth ∝ N^${over.exponent.toFixed(2)})`;
}
