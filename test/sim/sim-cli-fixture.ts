/** What the `prefixmesh sim` CLI tests share: the flags' defaults and a stream that keeps what is written. */
import { Writable } from "node:stream";
import type { SimOptions } from "../../src/cli/sim.js";
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
