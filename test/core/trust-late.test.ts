/** Peer trust's late marks (trust.ts `late`): counted apart within failures, once per attempt. */
import { describe, expect, it } from "vitest";
import { MAX_DEPARTED } from "../../src/core/node/trust.js";
import { newTrust as fresh } from "./trust-fixture.js";

describe("trust: late marks", () => {
  it("late marks count apart, within failures, once per attempt, and are kept while the peer is out", () => {
    const t = fresh();
    t.sent("b", "slow", 0);
    t.late("b", "slow", 0);
    t.late("b", "slow", 1); // the same attempt again (it failed already): no second mark
    t.ended("b", "slow");
    t.sent("b", "err", 10);
    t.failed("b", "err", 10);
    t.late("b", "err", 10); // failed already by another rule: not marked late on top
    t.ended("b", "err");
    t.sent("b", "late answer", 20);
    t.answeredLate("b", "late answer", 20);
    expect(t.view("b")).toMatchObject({ failures: 3, late: 2 });
    t.remove("b", 30);
    t.add("b");
    expect(t.view("b")).toMatchObject({ failures: 3, late: 2 });
  });

  it("start over when the record is forgotten (why the metric is a gauge, not a counter)", () => {
    const t = fresh();
    t.sent("b", "slow", 0);
    t.answeredLate("b", "slow", 0);
    t.remove("b", 1);
    for (let i = 0; i < MAX_DEPARTED; i++) {
      t.add(`x${i}`);
      t.remove(`x${i}`, 2);
    }
    t.add("b");
    expect(t.view("b")).toMatchObject({ failures: 0, late: 0 });
  });
});
