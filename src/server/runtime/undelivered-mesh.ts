/**
 * Mesh messages that do not reach a node which is not (yet) a member: a joiner this node answers at
 * the peer-port address it advertises. Seconds of failures are a joiner still starting or one that
 * died; failures that last mean the address is one this node cannot reach (a container's own address,
 * a wrong --advertise), and the joiner is never admitted. Said at warn, once a minute per node;
 * every failure stays at debug. Only failures are seen (a delivery is not): a streak ends at a pause. A member's failures are SWIM's to judge (suspicion), not said here.
 */
import type { NodeId } from "../../core/node/types.js";
import type { RuntimeLogger } from "./logger.js";

/** Failures lasting this long, with no delivery between, are said. */
export const UNDELIVERED_SAY_AFTER_MS = 10_000;
const SAY_EVERY_MS = 60_000;
const STREAK_GAP_MS = 5_000;
/** Nodes tracked at once: ids come from authenticated senders, but a mesh may be large. */
const MAX_TRACKED = 256;

export class UndeliveredMesh {
  private readonly failing = new Map<NodeId, { since: number; last: number; saidAt: number | undefined }>();

  constructor(private readonly now: () => number = Date.now) {}

  failed(logger: RuntimeLogger, to: NodeId, url: string | undefined, err: Error, member: boolean): void {
    logger.debug({ peer: to, err: err.message }, "mesh message not delivered");
    if (member) return void this.failing.delete(to);
    const now = this.now();
    let f = this.failing.get(to);
    // A pause in the failures (a joiner resends its join each second or so): a new streak.
    if (f !== undefined && now - f.last > STREAK_GAP_MS) {
      this.failing.delete(to);
      f = undefined;
    }
    if (f === undefined) {
      if (this.failing.size >= MAX_TRACKED) {
        const oldest = this.failing.keys().next().value;
        if (oldest !== undefined) this.failing.delete(oldest);
      }
      f = { since: now, last: now, saidAt: undefined };
      this.failing.set(to, f);
    }
    f.last = now;
    if (now - f.since < UNDELIVERED_SAY_AFTER_MS) return;
    if (f.saidAt !== undefined && now - f.saidAt < SAY_EVERY_MS) return;
    f.saidAt = now;
    logger.warn(
      { peer: to, url, err: err.message, failingS: Math.round((now - f.since) / 1000) },
      "joining node unreachable at the peer address it advertises: it cannot be admitted; " +
        "give it --advertise HOST:PORT that this node reaches (behind NAT or in a container)",
    );
  }
}
