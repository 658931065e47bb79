/**
 * Spot checks in the daemon's configuration with `spotCheckRate` 5%, fixed seed: a lying peer (its
 * answers to forwards carry wrong text) is quarantined within 200 forwarded deterministic requests,
 * after which no wrong answer reaches a client. Without checks its answers keep coming.
 */
import { describe, expect, it } from "vitest";
import { DAEMON_NODE_DEFAULTS } from "../../src/core/node/config.js";
import { answersAgree, COMPARE_CHARS, SpotChecks } from "../../src/core/node/spot-check.js";
import { DEFAULT_PROFILE } from "../../src/engines/sim/profiles.js";
import { runSimulation } from "../../src/sim/run.js";
import type { SimResult } from "../../src/sim/types.js";
import { assembleWorkload } from "../../src/workload/assemble.js";
import { syntheticPool } from "../../src/workload/synthetic.js";

const LIAR = 3;
const base = assembleWorkload("synthetic", "synthetic", syntheticPool({ subjects: 8, scale: 0.05 }), {
  seed: 5,
  requests: 2_000,
  skewed: false,
  openLoopRate: 4,
});
// Deterministic requests: greedy decoding.
const workload = { ...base, requests: base.requests.map((r) => ({ ...r, temperature: 0 })) };

function run(spotCheckRate: number): SimResult {
  return runSimulation(
    {
      nodes: 4,
      policy: DAEMON_NODE_DEFAULTS.policy,
      daemonConfig: true,
      node: { spotCheckRate },
      commMs: 2,
      jitterMs: 0.5,
      pollMs: 500,
      profile: DEFAULT_PROFILE,
      capacityTokens: 3_000,
      seed: 7,
      faults: { node: { lies: [{ node: LIAR }] } },
    },
    workload,
  );
}

describe("spot checks: a lying peer", () => {
  it("is quarantined within 200 forwarded deterministic requests at a 5% check rate", () => {
    const r = run(0.05);
    expect(r.totals.answered).toBe(workload.requests.length);
    expect(r.totals.duplicateReplies).toBe(0);
    expect(r.totals.spotCheckMismatches).toBeGreaterThan(0);
    // Forwards the liar answered to other origins, in time order: the wrong ones stop early.
    const toLiar = r.records
      .filter((x) => x.served === LIAR && x.origin !== LIAR)
      .sort((a, b) => a.endMs - b.endMs);
    const lastWrong = toLiar.findLastIndex((x) => !x.correct);
    expect(lastWrong).toBeGreaterThanOrEqual(0);
    expect(lastWrong).toBeLessThan(200);
    // Every origin stopped sending it work: nothing served by it for others after the last wrong one
    // beyond what was already in flight.
    expect(toLiar.length - lastWrong - 1).toBeLessThan(5);
    // Without checks, its wrong answers go on for the whole run.
    const unchecked = run(0);
    expect(unchecked.totals.incorrect).toBeGreaterThan(3 * r.totals.incorrect);
  });

  it("compares the first characters only (the documented rule)", () => {
    const a = "x".repeat(COMPARE_CHARS);
    expect(answersAgree(`${a} tail one`, `${a} tail two`)).toBe(true);
    expect(answersAgree("The answer is B", "The answer is C")).toBe(false);
    expect(answersAgree("short", "short")).toBe(true);
  });
});

describe("spot checks: which answers are kept for a check", () => {
  const request = { id: "r", tokens: new Uint32Array([1, 2]), maxTokens: 4, temperature: 0 };
  const always = () => 0;

  it("keeps a greedy answer, and none with a presence or frequency penalty (engines count those differently)", () => {
    const checks = new SpotChecks(1);
    checks.offer("n1", request, "a", always);
    expect(checks.take()?.peer).toBe("n1");
    checks.offer("n1", { ...request, presencePenalty: 0.5 }, "a", always);
    checks.offer("n1", { ...request, frequencyPenalty: -1 }, "a", always);
    expect(checks.take()).toBeUndefined();
    checks.offer("n2", { ...request, presencePenalty: 0, frequencyPenalty: 0 }, "a", always);
    expect(checks.take()?.peer).toBe("n2");
  });
});
