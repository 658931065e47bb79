import { describe, expect, it } from "vitest";
import type { Engine } from "../../src/core/engine.js";
import { admissionError } from "../../src/server/runtime/client-admission.js";
import type { InferenceInput } from "../../src/server/service.js";

// A test double: only the namespace check is read, and it finds nothing wrong.
const engine = { namespaceProblem: () => undefined } as unknown as Engine;
const input = {} as InferenceInput;

describe("client admission", () => {
  it("tells a booting node from a leaving one, both retryable 503s", () => {
    const starting = admissionError({ phase: "starting", pending: 0, max: 8 }, engine, input);
    expect([starting?.status, starting?.message, starting?.retryAfterSec]).toEqual([
      503,
      "node is starting",
      1,
    ]);
    const stopping = admissionError({ phase: "stopping", pending: 0, max: 8 }, engine, input);
    expect([stopping?.status, stopping?.message]).toEqual([503, "node is shutting down"]);
  });

  it("admits an open node below its bound and refuses at it with 429", () => {
    expect(admissionError({ phase: "open", pending: 7, max: 8 }, engine, input)).toBeUndefined();
    expect(admissionError({ phase: "open", pending: 8, max: 8 }, engine, input)?.status).toBe(429);
  });
});
