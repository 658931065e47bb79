/**
 * The node simulator's member checks (sim/effects.ts) as the daemon keeps them (mesh-verify.ts): one
 * under way per (checker, id), ended by its answer; a restarted checker's checks are its own, and the
 * checks a crash left unanswered are forgotten, not kept for every life it had. A partition between
 * checker and member fails each try as the daemon's hello would (sim/hello-tries.ts).
 */
import { describe, expect, test } from "vitest";
import { DEFAULT_TIMEOUTS } from "../../src/net/transport-timeouts.js";
import { type EffectsContext, SimEffects } from "../../src/sim/effects.js";
import { EventQueue } from "../../src/sim/event-queue.js";
import type { Agenda, SimNodeState } from "../../src/sim/run-state.js";

/** A test double of the run loop's context: two running nodes, no faults, a partition between if `cut`. */
function fakeRun(cut = false) {
  const queue: Agenda = new EventQueue();
  const nodes = [0, 1].map((idx) => ({ idx, inc: 0, node: {} }) as unknown as SimNodeState);
  const ctx = {
    nodes,
    idxOf: new Map([
      ["n0", 0],
      ["n1", 1],
    ]),
    queue,
    net: { partitioned: (_now: number, a: number, b: number) => cut && a !== b },
    nodeFaults: { authenticated: () => true, pausedUntil: () => 0 },
    commMs: 1,
    now: () => 0,
  } as unknown as EffectsContext;
  return { effects: new SimEffects(ctx), queue, checker: nodes[0] as SimNodeState };
}

describe("member checks in the node simulator", () => {
  test("a second check of an id under way starts no tries; its answer ends it", () => {
    const { effects, queue, checker } = fakeRun();
    effects.apply(checker, [{ type: "verify-member", id: "n1" }]);
    effects.apply(checker, [{ type: "verify-member", id: "n1" }]);
    expect(queue.size).toBe(1);
    effects.answer(checker, "n1", true);
    effects.apply(checker, [{ type: "verify-member", id: "n1" }]);
    expect(queue.size).toBe(2);
  });

  test("a restarted checker checks anew, and its lives' unanswered checks are not kept", () => {
    const { effects, queue, checker } = fakeRun();
    for (let life = 0; life < 50; life++) {
      effects.apply(checker, [{ type: "verify-member", id: "n1" }]);
      expect(queue.size).toBe(life + 1);
      checker.inc += 2; // a crash and a restart: the check's answer is dropped with the old life
    }
    expect(effects.checksUnderWay).toBe(1);
  });

  test("a check across a partition is not answered: its try waits out its time, then retries", () => {
    const { effects, queue, checker } = fakeRun(true);
    effects.apply(checker, [{ type: "verify-member", id: "n1" }]);
    const ev = queue.pop();
    expect(ev?.k).toBe("verify");
    expect(ev?.at).toBeGreaterThanOrEqual(DEFAULT_TIMEOUTS.messageTotalMs);
  });
});
