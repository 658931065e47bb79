/**
 * What a Scuttlebutt node asks for (scuttlebutt.ts): from a digest, the owners it holds older and, up to
 * its room, owners it lacks at random; when full, now and then one owner to discover (admitted in place
 * of the least useful). An owner asked of one peer is not asked of another while the answer is on its
 * way (`pendingMs`). Owns the asks in flight and the discovery in progress; the logs are the caller's.
 */
import type { Estimates } from "../../estimates.js";
import type { DigestEntry, ScuttlebuttConfig, ScuttlebuttDeps } from "./config.js";
import { holding } from "./digests.js";
import { type OwnerLog, pickRandom } from "./states.js";

/** A member's id (node/types.ts's NodeId). */
type NodeId = string;

export class Wants {
  /** The one owner we asked for while full (discovery): admitted in place of the least useful. */
  private discovering: NodeId | undefined;
  private discoveredAt: number | undefined;
  /** Owners we asked someone for (wants), and when: not asked again while the answer is on its way. */
  private readonly asked = new Map<NodeId, number>();

  constructor(
    private readonly selfId: NodeId,
    private readonly logs: ReadonlyMap<NodeId, OwnerLog>,
    private readonly estimates: Estimates,
    private readonly deps: ScuttlebuttDeps,
    private readonly config: ScuttlebuttConfig,
  ) {}

  /**
   * What we ask of a digest's sender (`entries`): each owner it holds newer than we do, from what we
   * hold, and new owners as our room allows; the asks are noted as pending.
   */
  of(entries: readonly DigestEntry[]): DigestEntry[] {
    const wants: DigestEntry[] = [];
    const room = this.room();
    const unheld: NodeId[] = [];
    const now = this.deps.now?.();
    for (const e of entries) {
      if (e.owner === this.selfId || this.isPending(e.owner, now)) continue;
      const log = this.logs.get(e.owner);
      const held = log === undefined ? undefined : holding(this.estimates, e.owner, log);
      if (held === undefined) unheld.push(e.owner);
      else if (e.epoch > held.epoch || (e.epoch === held.epoch && e.version > held.version))
        wants.push({ owner: e.owner, ...held });
    }
    // New owners, as many as we have room for, at random (an owner is held by some, not by all).
    for (const owner of pickRandom(unheld, room, this.deps.random))
      wants.push({ owner, epoch: 0, version: 0 });
    // Full: one owner we do not hold is asked for now and then (it then replaces our least useful
    // estimate), so new specialists are still found: once per discoveryMs, or (no clock) one in
    // discoveryOdds exchanges.
    if (room === 0 && unheld.length > 0 && this.mayDiscover(now)) {
      const owner = unheld[Math.floor(this.deps.random() * unheld.length)] as NodeId;
      wants.push({ owner, epoch: 0, version: 0 });
      this.discovering = owner;
      this.discoveredAt = now;
    }
    if (now !== undefined) for (const w of wants) this.asked.set(w.owner, now);
    this.prunePending(now);
    return wants;
  }

  /** `owner` is sought (seek): the one owner a full node admits in place of its least useful. */
  seeking(owner: NodeId): void {
    this.discovering = owner;
  }

  /** We asked someone for `owner` at `now` (no clock: nothing is pending). */
  askedAt(owner: NodeId, now: number | undefined): void {
    if (now !== undefined) this.asked.set(owner, now);
  }

  /** A state of `owner` came, or `owner` is gone: no longer pending. */
  forget(owner: NodeId): void {
    this.asked.delete(owner);
  }

  /** Whether a full node takes `owner` (the one it is discovering; that discovery then ends). */
  replaces(owner: NodeId): boolean {
    if (owner !== this.discovering) return false;
    this.discovering = undefined;
    return true;
  }

  hasRoom(): boolean {
    return this.logs.size < this.config.maxEstimates;
  }

  /** Owners we would still take (at most maxStates: one message's worth). */
  room(): number {
    return Math.max(0, Math.min(this.config.maxEstimates - this.logs.size, this.config.maxStates));
  }

  /** We asked someone for `owner` less than `pendingMs` ago. */
  private isPending(owner: NodeId, now: number | undefined): boolean {
    const at = now === undefined ? undefined : this.asked.get(owner);
    return at !== undefined && now !== undefined && now - at < this.config.pendingMs;
  }

  /** Forgets answers that never came (lost): `asked` stays within the owners held and a few more. */
  private prunePending(now: number | undefined): void {
    if (now === undefined || this.asked.size <= 2 * this.logs.size + 16) return;
    for (const [owner, at] of this.asked) if (now - at >= this.config.pendingMs) this.asked.delete(owner);
  }

  private mayDiscover(now: number | undefined): boolean {
    if (now === undefined) return this.deps.random() * this.config.discoveryOdds < 1;
    return this.discoveredAt === undefined || now - this.discoveredAt >= this.config.discoveryMs;
  }
}
