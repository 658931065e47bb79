/** The cancel effects' pure helpers: the final cancels a request owes, and a step's cancels marked final. */
import { describe, expect, it } from "vitest";
import { markFinalCancels, owedCancels } from "../../src/core/node/abort-runs.js";
import type { Effect } from "../../src/core/node/types.js";

describe("the cancel effects", () => {
  const cancel = (to: string, reqId: string, attempt: number, final?: true): Effect => ({
    type: "send",
    to,
    msg: final ? { type: "cancel", reqId, attempt, final } : { type: "cancel", reqId, attempt },
  });

  it("owed: one per attempt not done whose peer is reachable, each once", () => {
    const p = {
      reqId: "r1",
      abandoned: [
        { to: "B", attempt: 1 },
        { to: "C", attempt: 2, done: true },
        { to: "D", attempt: 3 },
        { to: "B", attempt: 4 },
      ],
    };
    const out: Effect[] = [];
    owedCancels(p, (id) => id !== "D", out);
    expect(out).toEqual([cancel("B", "r1", 1, true), cancel("B", "r1", 4, true)]);
    owedCancels(p, () => true, out);
    expect(out).toEqual([cancel("B", "r1", 1, true), cancel("B", "r1", 4, true), cancel("D", "r1", 3, true)]);
  });

  it("a step's cancels: final once their request settled, one per peer and attempt, finality kept", () => {
    const tick: Effect = { type: "cancel-timer", timer: { kind: "poll" } };
    const out: Effect[] = [
      cancel("B", "r1", 1),
      tick,
      cancel("B", "r2", 1),
      cancel("B", "r2", 1, true),
      cancel("B", "r1", 1),
      cancel("C", "r1", 1),
    ];
    markFinalCancels(out, (id) => id === "r2");
    expect(out).toEqual([
      cancel("B", "r1", 1, true),
      tick,
      cancel("B", "r2", 1, true),
      cancel("C", "r1", 1, true),
    ]);
  });
});
