import { describe, expect, it } from "vitest";
import { InvariantError, invariant } from "../../src/core/invariant.js";
import { Harness, prompt } from "./node-harness.js";

describe("invariant", () => {
  it("passes when the condition holds and throws InvariantError, with the message, when not", () => {
    expect(() => invariant(true, "never")).not.toThrow();
    expect(() => invariant(0, "queue depth went negative")).toThrow(InvariantError);
    expect(() => invariant(false, () => `built ${1 + 1} late`)).toThrow(/invariant violated: built 2 late/);
  });

  it("builds a lazy message only on failure", () => {
    let built = 0;
    invariant(true, () => `${++built}`);
    expect(built).toBe(0);
  });

  it("a broken invariant inside the node surfaces from handle(), not swallowed", () => {
    const h = new Harness(["A"]);
    // Tampering behind the executor's back (a test only): a pin on A's tree that no job holds.
    h.node("A").localTree().lock(prompt(1, 1));
    expect(() => h.client("A", "r1", prompt(2, 1))).toThrow(InvariantError);
  });
});
