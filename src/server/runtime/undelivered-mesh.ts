/**
 * Mesh messages that do not reach a node which is not (yet) a member: a joiner this node answers at
 * the peer-port address it advertises. Failures that last while the node keeps sending to us mean
 * the address is one this node cannot reach (a container's own address, a wrong --advertise), and the
 * joiner is never admitted: said at warn, once a minute per node; every failure stays at debug.
 * Only failures to a node still heard from count: one killed (a dead member's reconnect push-pulls,
 * a lone node asking its dead seed again) sends nothing, so its failures are never said here.
 * A member's failures are SWIM's to judge (suspicion).
 */
import type { NodeId } from "../../core/node/types.js";
import type { RuntimeLogger } from "./logger.js";

/** Failures lasting this long, with no pause between, are said. */
export const UNDELIVERED_SAY_AFTER_MS = 10_000;
const SAY_EVERY_MS = 60_000;
/** A pause this long ends a streak; a message heard longer ago is not "still heard". */
const STREAK_GAP_MS = 5_000;
/** Nodes tracked at once: ids come from authenticated senders, but a mesh may be large. */
const MAX_TRACKED = 256;

interface Failing {
  since: number;
  last: number;
  heardAt: number | undefined;
  saidAt: number | undefined;
}

export class UndeliveredMesh {
  private readonly failing = new Map<NodeId, Failing>();

  constructor(private readonly now: () => number = Date.now) {}

  /** A mesh message came from `from`: only a node already failing is noted (no new key). */
  heard(from: NodeId): void {
    const f = this.failing.get(from);
    if (f !== undefined) f.heardAt = this.now();
  }

  failed(logger: RuntimeLogger, to: NodeId, url: string | undefined, err: Error, member: boolean): void {
    logger.debug({ peer: to, err: err.message }, "mesh message not delivered");
    if (member) return void this.failing.delete(to);
    const now = this.now();
    let f = this.failing.get(to);
    if (f === undefined) f = this.track(to, now);
    else if (now - f.last > STREAK_GAP_MS) {
      // A pause in the failures: a new streak, still within the once-a-minute bound of the last.
      f.since = now;
      f.heardAt = undefined;
    }
    f.last = now;
    if (now - f.since < UNDELIVERED_SAY_AFTER_MS) return;
    if (f.heardAt === undefined || now - f.heardAt > STREAK_GAP_MS) return;
    if (f.saidAt !== undefined && now - f.saidAt < SAY_EVERY_MS) return;
    f.saidAt = now;
    logger.warn(
      { peer: to, url, err: err.message, failingS: Math.round((now - f.since) / 1000) },
      "joining node unreachable at the peer address it advertises: it cannot be admitted; " +
        "give it --advertise HOST:PORT that this node reaches (behind NAT or in a container)",
    );
  }

  get size(): number {
    return this.failing.size;
  }

  /** A new entry; those whose failures stopped a minute ago or more are forgotten first. */
  private track(to: NodeId, now: number): Failing {
    for (const [id, f] of this.failing) if (now - f.last >= SAY_EVERY_MS) this.failing.delete(id);
    if (this.failing.size >= MAX_TRACKED) {
      const oldest = this.failing.keys().next().value;
      if (oldest !== undefined) this.failing.delete(oldest);
    }
    const f: Failing = { since: now, last: now, heardAt: undefined, saidAt: undefined };
    this.failing.set(to, f);
    return f;
  }
}
