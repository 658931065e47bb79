/**
 * The daemon's start-up calibration (src/server/runtime/calibration.ts), as the simulator runs it: a
 * node booting in the daemon's configuration measures its engine before it takes requests, so its
 * cost fit — and the costs it advertises — start from its own (possibly slowed) engine instead of
 * the configured prior. Same runs as the daemon's: a long and a short prompt cold, then the long one
 * again with its prefix cached, a few output tokens each, two rounds. Virtual time does not pass (a
 * daemon is not ready until calibration ends, and the clients' schedule starts at ready).
 */
import type { CostSample } from "../core/node/engine-costs.js";
import { engineCost } from "../engines/sim/cost.js";
import type { CostProfile } from "../engines/sim/profiles.js";

/** Prompt lengths of the daemon's calibration prompts in cl100k tokens (256 and 24 short words). */
const LONG_TOKENS = 655;
const SHORT_TOKENS = 44;
const OUTPUT_TOKENS = 8;
const ROUNDS = 2;

/** The samples calibration measures on an engine of `profile` running `slowdown` × slower. */
export function calibrationSamples(profile: CostProfile, slowdown = 1): CostSample[] {
  const samples: CostSample[] = [];
  const run = (tokens: number, cached: number): void => {
    const c = engineCost(profile, tokens, cached, OUTPUT_TOKENS);
    samples.push({
      uncached: tokens - cached,
      cached,
      prefillMs: c.prefillMs * slowdown,
      outputTokens: OUTPUT_TOKENS,
      decodeMs: c.decodeMs * slowdown,
    });
  };
  for (let r = 0; r < ROUNDS; r++) {
    run(LONG_TOKENS, 0);
    run(SHORT_TOKENS, 0);
    run(LONG_TOKENS, LONG_TOKENS);
  }
  return samples;
}
