/** The trust config and fresh breaker (peers b and c) the trust tests share. */
import { Trust, type TrustConfig } from "../../src/core/node/trust.js";

export const trustConfig: TrustConfig = {
  enabled: true,
  failures: 3,
  windowMs: 60_000,
  openMs: 10_000,
  maxOpenMs: 40_000,
  maxUnanswered: 3,
};

/** A Trust over peers b and c, `c` over the shared config. */
export const newTrust = (c: Partial<TrustConfig> = {}) => {
  const t = new Trust({ ...trustConfig, ...c });
  t.reset(["b", "c"]);
  return t;
};
