/**
 * The peer port's authentication refusals in the log. Anyone who reaches the port can send many a
 * second (a scanner, or a node with another secret sending its snapshots and SWIM messages), so each
 * reason is said at warn once a minute, with how many more were refused since it was last said; the
 * metric (prefixmesh_peer_auth_rejected_total) counts every one.
 */
import type { RuntimeLogger } from "./logger.js";

export const AUTH_REFUSAL_SAY_EVERY_MS = 60_000;
/** Reasons are the verifier's own words, a handful; bounded all the same. */
const MAX_REASONS = 64;

export class AuthRefusalLog {
  private readonly said = new Map<string, { at: number; since: number }>();

  constructor(
    private readonly logger: RuntimeLogger,
    private readonly now: () => number,
  ) {}

  refused(reason: string): void {
    const now = this.now();
    const s = this.said.get(reason);
    if (s !== undefined && now - s.at < AUTH_REFUSAL_SAY_EVERY_MS) {
      s.since++;
      return;
    }
    if (s === undefined && this.said.size >= MAX_REASONS) this.said.clear();
    this.said.set(reason, { at: now, since: 0 });
    const more = s !== undefined && s.since > 0 ? { refusedSinceLastSaid: s.since } : {};
    this.logger.warn({ reason, ...more }, "peer request refused by authentication");
  }
}
