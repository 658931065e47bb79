/** What a client sees of a node's refusal: 429 with Retry-After from the node's drain estimate. */
import { describe, expect, it } from "vitest";
import { serviceErrorOf } from "../../src/server/runtime/client-streams.js";

describe("serviceErrorOf", () => {
  it("429 for overload, Retry-After the node's estimate in whole seconds (at least 1)", () => {
    const e = serviceErrorOf({
      ok: false,
      error: "overloaded: expected wait",
      code: "overloaded",
      retryAfterMs: 7_200,
    });
    expect(e.status).toBe(429);
    expect(e.retryAfterSec).toBe(8);
    expect(
      serviceErrorOf({ ok: false, error: "overloaded", code: "overloaded", retryAfterMs: 10 }).retryAfterSec,
    ).toBe(1);
    expect(
      serviceErrorOf({ ok: false, error: "overloaded: queue full", code: "overloaded" }).retryAfterSec,
    ).toBe(1);
    expect(
      serviceErrorOf({ ok: false, error: "engine: boom", code: "engine" }).retryAfterSec,
    ).toBeUndefined();
  });
});
