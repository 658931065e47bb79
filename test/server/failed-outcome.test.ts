import { describe, expect, it } from "vitest";
import { TransportError } from "../../src/net/transport-error.js";
import { failedOutcome } from "../../src/server/request-outcome.js";
import { ServiceError } from "../../src/server/service.js";

describe("failedOutcome", () => {
  it("reads the status of the service's own errors, the client's answer", () => {
    expect(failedOutcome(new ServiceError(429, "overloaded", "busy"))).toBe("overloaded");
    expect(failedOutcome(new ServiceError(499, "aborted", "client gone"))).toBe("gone");
    expect(failedOutcome(new ServiceError(504, "timeout", "deadline"))).toBe("error");
  });

  it("counts any other error with a status as an error: the client is answered 500", () => {
    // A peer's refusal carries the peer's status, not the one this node answers with.
    expect(failedOutcome(new TransportError("http", "peer busy", 429))).toBe("error");
    expect(failedOutcome(new TransportError("http", "peer's client gone", 499))).toBe("error");
    expect(failedOutcome(Object.assign(new Error("x"), { status: 499 }))).toBe("error");
    expect(failedOutcome(undefined)).toBe("error");
  });
});
