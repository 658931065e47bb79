/**
 * A log line each time a peer's liveness changes as this node sees it (checked once per anti-entropy
 * round): `peer suspected` when it fell silent for the failure detector's k × Δpoll (crashed, frozen
 * or cut off), `peer down` when it said goodbye (stopped gracefully), stayed silent for
 * `--down-after-polls` Δpoll, or left the membership, `peer live` when it is heard again. A peer's first
 * sighting is not news unless it is already not live.
 */
import type { Liveness } from "../../core/node/types.js";
import type { RuntimeLogger } from "../runtime/logger.js";

export interface PeerLiveness {
  id: string;
  liveness: Liveness;
  /** ms since this node last heard from it (undefined: never). */
  silentMs?: number | undefined;
}

export class LivenessLog {
  private readonly last = new Map<string, Liveness>();

  constructor(private readonly logger: RuntimeLogger) {}

  check(peers: readonly PeerLiveness[]): void {
    const seen = new Set<string>();
    for (const p of peers) {
      seen.add(p.id);
      const before = this.last.get(p.id);
      if (before === p.liveness) continue;
      this.last.set(p.id, p.liveness);
      if (p.liveness === "unknown") continue;
      if ((before === undefined || before === "unknown") && p.liveness === "live") continue;
      const fields = { peer: p.id, liveness: p.liveness, was: before ?? "unknown", silentMs: p.silentMs };
      if (p.liveness === "live") this.logger.info(fields, "peer live");
      else this.logger.warn(fields, p.liveness === "down" ? "peer down" : "peer suspected");
    }
    for (const id of this.last.keys()) if (!seen.has(id)) this.last.delete(id);
  }
}
