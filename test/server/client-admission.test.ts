import { describe, expect, it } from "vitest";
import type { Engine } from "../../src/core/engine.js";
import { admissionError, ClientIntake } from "../../src/server/runtime/client-admission.js";
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

  it("counts requests in the intake against the bound with the waiting clients, until each ends", () => {
    const intake = new ClientIntake();
    const a = intake.admit("open", 1, 3);
    intake.admit("open", 1, 3);
    // One waiting client and two in the intake reach a bound of 3: refused before any tokenizing.
    expect(() => intake.admit("open", 1, 3)).toThrow(expect.objectContaining({ status: 429 }));
    expect(intake.submitted(a)).toBe("admitted");
    a.end();
    expect(intake.size).toBe(1);
    expect(intake.admit("open", 1, 3)).toBeDefined();
    expect(() => intake.admit("stopping", 0, 3)).toThrow("node is shutting down");
  });

  it("refuses a request to serve while the node starts or resets, before it is tokenized", () => {
    const intake = new ClientIntake();
    expect(() => intake.admit("starting", 0, 3)).toThrow("node is starting");
    expect(() => intake.admit("resetting", 0, 3)).toThrow("node is resetting its cache");
    // A /tokenize serves nothing: taken in unless the node is shutting down.
    expect(intake.admit("starting", 0, 3, false)).toBeDefined();
    expect(intake.admit("resetting", 0, 3, false)).toBeDefined();
    expect(() => intake.admit("stopping", 0, 3, false)).toThrow("node is shutting down");
    expect(intake.size).toBe(2);
  });
});
