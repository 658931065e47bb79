/**
 * The peer port's authentication refusals in the log. Anyone who reaches the port can send many a
 * second (a scanner, or a node with another secret sending its snapshots and SWIM messages), so each
 * reason is said at warn once a minute, with how many more were refused since it was last said; the
 * metric (prefixmesh_peer_auth_rejected_total) counts every one.
 */
import type { RuntimeLogger } from "./logger.js";
import { SaidPerKey } from "./said-per-key.js";

export const AUTH_REFUSAL_SAY_EVERY_MS = 60_000;
/** Reasons are the verifier's own words, a handful; bounded all the same. */
const MAX_REASONS = 64;

export class AuthRefusalLog {
  private readonly said = new SaidPerKey(AUTH_REFUSAL_SAY_EVERY_MS, MAX_REASONS);

  constructor(
    private readonly logger: RuntimeLogger,
    private readonly now: () => number,
  ) {}

  refused(reason: string): void {
    const held = this.said.take(reason, this.now());
    if (held === undefined) return;
    const more = held > 0 ? { refusedSinceLastSaid: held } : {};
    this.logger.warn({ reason, ...more }, "peer request refused by authentication");
  }
}
