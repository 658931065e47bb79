import { describe, expect, it } from "vitest";
import { InvariantError, invariant } from "../../src/core/invariant.js";

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
});
