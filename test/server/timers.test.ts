/**
 * The runtime's timer table: staged snapshot steps (the `estimates` timer) run back to back within a
 * slice, then yield the event loop; other timers stay plain timeouts.
 */
import { describe, expect, it } from "vitest";
import { type NodeTimer, TimerTable } from "../../src/server/runtime/timers.js";
import { waitFor } from "../e2e/helpers.js";

const STEP: NodeTimer = { kind: "estimates" };
const macrotask = () => new Promise<void>((r) => setImmediate(r));

/** A table whose clock moves 1 ms per reading, and a step callback that re-arms `steps` times. */
function stepping(steps: number, sliceMs: number) {
  let clock = 0;
  const table = new TimerTable({ sliceMs, now: () => clock++ });
  const fired: number[] = [];
  let tick = 0;
  let left = steps;
  const fire = (t: NodeTimer) => {
    fired.push(tick);
    if (--left > 0) table.set(t, 0, fire);
  };
  return {
    table,
    fired,
    fire,
    next: async () => {
      tick++;
      await macrotask();
    },
  };
}

describe("TimerTable", () => {
  it("runs re-armed steps within a slice, then yields to other work", async () => {
    const s = stepping(10, 3);
    s.table.set(STEP, 0, s.fire);
    for (let i = 0; i < 10 && s.fired.length < 10; i++) await s.next();
    expect(s.fired.length).toBe(10);
    // The clock reads 1 ms per call: at most 3 steps share a macrotask, and the work spans several.
    const perTask = new Map<number, number>();
    for (const t of s.fired) perTask.set(t, (perTask.get(t) ?? 0) + 1);
    expect(Math.max(...perTask.values())).toBeLessThanOrEqual(3);
    expect(perTask.size).toBeGreaterThanOrEqual(4);
  });

  it("stops a slice whose timer is cancelled mid-way, and after clear", async () => {
    const s = stepping(100, 1_000);
    let n = 0;
    const fire = (t: NodeTimer) => {
      n++;
      s.table.set(t, 0, fire);
      if (n === 5) s.table.cancel(t);
    };
    s.table.set(STEP, 0, fire);
    await macrotask();
    await macrotask();
    expect(n).toBe(5);
    s.table.set(STEP, 0, fire);
    s.table.clear();
    await macrotask();
    expect(n).toBe(5);
  });

  it("keeps other timers as timeouts, replaced by key", async () => {
    const table = new TimerTable();
    const got: string[] = [];
    table.set({ kind: "poll" }, 50_000, () => got.push("old"));
    table.set({ kind: "poll" }, 1, () => got.push("poll"));
    await waitFor(() => got.length > 0, 10_000, "the 1 ms poll timer to fire");
    expect(got).toEqual(["poll"]);
    table.clear();
  });
});
