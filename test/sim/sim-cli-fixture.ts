/** What the `prefixmesh sim` CLI tests share: flag defaults, a usage-error catcher, an output sink. */
import { Writable } from "node:stream";
import { expect } from "vitest";
import { CliError } from "../../src/cli/errors.js";
import { parseSimOptions, type SimOptions } from "../../src/cli/sim.js";
import { DEFAULT_PROFILE } from "../../src/engines/sim/profiles.js";

export const SIM_DEFAULTS: SimOptions = {
  nodes: "4",
  policy: "affinity",
  commMs: "2",
  jitterMs: "0.5",
  pollMs: "500",
  workload: "synthetic",
  seed: "1",
  profile: DEFAULT_PROFILE,
};

export function sink(): { stream: Writable; text: () => string } {
  let buf = "";
  const stream = new Writable({
    write(chunk, _enc, cb) {
      buf += String(chunk);
      cb();
    },
  });
  return { stream, text: () => buf };
}

/** A non-TTY stderr (no progress bar) that discards what is written. */
export const quietErr = () => Object.assign(sink().stream, { isTTY: false }) as unknown as NodeJS.WriteStream;

/** The usage error (exit 2) parseSimOptions gives these flags over the defaults; the test fails if none. */
export function usageError(o: Partial<SimOptions>): CliError {
  let caught: unknown;
  try {
    parseSimOptions({ ...SIM_DEFAULTS, ...o });
  } catch (err) {
    caught = err;
  }
  expect(caught, JSON.stringify(o)).toBeInstanceOf(CliError);
  expect((caught as CliError).exitCode).toBe(2);
  return caught as CliError;
}
