/**
 * The CRDT-like rule of the paper's §3.4 for peer estimates: state-based, single writer per estimate,
 * so applying snapshots is idempotent and order-insensitive per sender.
 *
 *  - (epoch, version) only moves forward: an older or duplicate snapshot never replaces a newer one.
 *  - A new epoch means the sender restarted with an empty cache: the old estimate is dropped at once,
 *    and our estimate is then that epoch's version 0 (empty) until something newer arrives.
 *  - A delta applies only on top of exactly its baseVersion; otherwise the caller should ask for (or
 *    wait for) a full snapshot: "need-full".
 *
 * The snapshot's version is `header.version` (the codec guarantees a delta's `version` equals it).
 */
import { invariant } from "./invariant.js";
import type { PeerIndex } from "./peer-index.js";
import type { Snapshot } from "./snapshot.js";

export type ApplyOutcome = "applied" | "stale" | "duplicate" | "need-full";

/** The (epoch, version) held per sender; the rest of its header is anti-entropy's (anti-entropy.ts). */
interface Held {
  epoch: number;
  version: number;
}

const EMPTY_BODY = { blockSize: 0, keys: new Float64Array(0) };

export class Estimates {
  private readonly heldBy = new Map<string, Held>();

  constructor(private readonly index: PeerIndex) {}

  apply(s: Snapshot): ApplyOutcome {
    const h = s.header;
    const cur = this.heldBy.get(h.sender);
    if (cur !== undefined && h.epoch < cur.epoch) return "stale";
    if (cur === undefined || h.epoch > cur.epoch) return this.newEpoch(s);
    const version = cur.version;
    const outcome = this.sameEpoch(s, cur);
    invariant(cur.version >= version, () => `estimate of ${h.sender} moved back from version ${version}`);
    return outcome;
  }

  /** The (epoch, version) of `peer` we hold, if any. */
  held(peer: string): { epoch: number; version: number } | undefined {
    const cur = this.heldBy.get(peer);
    return cur === undefined ? undefined : { epoch: cur.epoch, version: cur.version };
  }

  remove(peer: string): void {
    this.heldBy.delete(peer);
    this.index.removePeer(peer);
  }

  private newEpoch(s: Snapshot): ApplyOutcome {
    const h = s.header;
    // Restarted (or first contact): whatever we believed is gone; the epoch's version 0 is empty.
    const held: Held = { epoch: h.epoch, version: 0 };
    this.heldBy.set(h.sender, held);
    if (s.kind === "full") {
      this.index.replaceEstimate(h.sender, s.body);
      held.version = h.version;
      return "applied";
    }
    this.index.replaceEstimate(h.sender, { ...EMPTY_BODY, blockSize: this.index.blockSize });
    if (s.kind === "delta" && s.delta.baseVersion === 0) {
      this.index.applyDelta(h.sender, s.delta);
      held.version = h.version;
      return "applied";
    }
    if (s.kind === "heartbeat" && h.version === 0) return "applied";
    return "need-full";
  }

  private sameEpoch(s: Snapshot, cur: Held): ApplyOutcome {
    const v = s.header.version;
    if (v < cur.version) return "stale";
    if (v === cur.version) return "duplicate";
    switch (s.kind) {
      case "full":
        this.index.replaceEstimate(s.header.sender, s.body);
        cur.version = v;
        return "applied";
      case "delta":
        if (s.delta.baseVersion !== cur.version) return "need-full";
        this.index.applyDelta(s.header.sender, s.delta);
        cur.version = v;
        return "applied";
      case "heartbeat":
        return "need-full";
    }
  }
}
