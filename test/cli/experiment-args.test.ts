import { availableParallelism } from "node:os";
import { describe, expect, test } from "vitest";
import { CliError } from "../../src/cli/errors.js";
import { parseSeed, parseSyntheticScale, parseWorkers } from "../../src/cli/experiment-args.js";

describe("the flags every experiment command parses the same way", () => {
  test("--workers: min(2, cores) when not given, else a whole number in 0..64", () => {
    expect(parseWorkers(undefined)).toBe(Math.min(2, availableParallelism()));
    expect(parseWorkers("0")).toBe(0);
    expect(parseWorkers("64")).toBe(64);
    expect(() => parseWorkers("65")).toThrow(CliError);
    expect(() => parseWorkers("1.5")).toThrow(/--workers/);
  });

  test("--synthetic-scale: 0.001..10", () => {
    expect(parseSyntheticScale("0.5")).toBe(0.5);
    expect(() => parseSyntheticScale("0")).toThrow(/--synthetic-scale/);
    expect(() => parseSyntheticScale("11")).toThrow(CliError);
  });

  test("--seed: a 32-bit unsigned integer", () => {
    expect(parseSeed("0")).toBe(0);
    expect(parseSeed(String(2 ** 32 - 1))).toBe(2 ** 32 - 1);
    expect(() => parseSeed(String(2 ** 32))).toThrow(/--seed/);
    expect(() => parseSeed("x")).toThrow(CliError);
  });
});
