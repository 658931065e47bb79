/**
 * Push to holders, for Scuttlebutt with `maxEstimates` (scuttlebutt.ts). A node holding M of N owners
 * shares few owners with any random partner (M² / N on average), so relayed states rarely reach it:
 * its estimates went stale as N grew. Instead each owner pushes its own change, once per round, to the
 * members that hold it, so a holder is at most a round behind and each node's traffic grows with the
 * owners it holds and how often they change, not with N.
 *
 * An owner learns its holders from digests that list it (a holder, in turn, sends each held owner a
 * one-entry digest now and then, and at once after a push it could not apply); a holder lapses after
 * `leaseRounds` of the owner's rounds without one. Per holder the owner keeps a cursor: the version it
 * last sent or was told, from which the next push is a delta. A push lost, or overtaken by a relayed
 * state, leaves the cursor off the holder's version: the holder's estimate refuses the delta (never a
 * wrong key set) and its next digest to the owner resets the cursor.
 */
import { invariant } from "../../invariant.js";

type NodeId = string;

/** An (epoch, version) of our tree a holder has, as far as we know. */
export interface Cursor {
  epoch: number;
  version: number;
}

interface Holder extends Cursor {
  /** Our round after which it lapses unless renewed. */
  until: number;
}

export class Holders {
  private readonly holders = new Map<NodeId, Holder>();

  constructor(
    /** Holders kept at most (a peer-controlled count): new ones beyond it are not pushed to. */
    private readonly max: number,
    private readonly leaseRounds: number,
  ) {
    invariant(max >= 0 && leaseRounds > 0, "holders: bad bounds");
  }

  get size(): number {
    return this.holders.size;
  }

  /** `id` holds our tree at `at` (its digest said so, or we just sent it that): a holder until round + lease. */
  note(id: NodeId, at: Cursor, round: number): void {
    const h = this.holders.get(id);
    if (h === undefined && this.holders.size >= this.max) return;
    this.holders.set(id, { epoch: at.epoch, version: at.version, until: round + this.leaseRounds });
  }

  drop(id: NodeId): void {
    this.holders.delete(id);
  }

  /**
   * The holders behind `now` (our epoch and version) in round `round`, with the cursor each push
   * starts from; each cursor then moves to `now` (a push is assumed delivered). Lapsed holders go.
   */
  due(now: Cursor, round: number, member: (id: NodeId) => boolean): { to: NodeId; from: Cursor }[] {
    const out: { to: NodeId; from: Cursor }[] = [];
    for (const [id, h] of this.holders) {
      if (h.until < round || !member(id)) {
        this.holders.delete(id);
        continue;
      }
      if (h.epoch === now.epoch && h.version >= now.version) continue;
      out.push({ to: id, from: { epoch: h.epoch, version: h.version } });
      h.epoch = now.epoch;
      h.version = now.version;
    }
    return out;
  }
}

/**
 * The holder's side: which held owners get a one-entry renewal digest this round: those just taken or
 * whose push we could not apply (the owner's cursor is off) first, and the one renewed longest ago.
 */
export class Renewals {
  private readonly last = new Map<NodeId, number>();
  private readonly urgent = new Set<NodeId>();

  /** A push from `owner` did not apply, or we just took it: renew with it next round. */
  mismatch(owner: NodeId): void {
    this.urgent.add(owner);
  }

  forget(owner: NodeId): void {
    this.last.delete(owner);
    this.urgent.delete(owner);
  }

  /**
   * The owners to renew in round `round` among `held`: up to `urgent` of those whose push did not apply
   * or that we just took (so a new holder is pushed to from its next round), and the one renewed longest ago.
   */
  next(held: ReadonlyMap<NodeId, unknown>, round: number, urgent: number): NodeId[] {
    const out: NodeId[] = [];
    for (const o of this.urgent) {
      if (out.length >= urgent) break;
      this.urgent.delete(o);
      if (held.has(o)) out.push(o);
    }
    let pick: NodeId | undefined;
    let oldest = Number.POSITIVE_INFINITY;
    for (const o of held.keys()) {
      const at = this.last.get(o) ?? Number.NEGATIVE_INFINITY;
      if (at < oldest && !out.includes(o)) {
        oldest = at;
        pick = o;
      }
    }
    if (pick !== undefined) out.push(pick);
    for (const o of out) this.last.set(o, round);
    return out;
  }
}
