/**
 * Scuttlebutt's push to holders (scuttlebutt.ts; the holders and renewals themselves: holders.ts): each
 * round our change to each member holding us, from its cursor, and one-entry renewal digests to owners
 * we hold, which keep us their holder. Owns the holders, the renewals and the round count.
 */
import type {
  DigestEntry,
  GossipMessage,
  ScuttlebuttConfig,
  ScuttlebuttCounters,
  ScuttlebuttDeps,
} from "./config.js";
import { Holders, Renewals } from "./holders.js";
import { type OwnerLog, type OwnerState, type OwnState, ownState } from "./states.js";

/** A member's id (node/types.ts's NodeId). */
type NodeId = string;

/** Renewal digests to owners just taken (or whose push did not apply) per round, at most. */
const URGENT_RENEWALS = 8;

export class HolderPush {
  private readonly holders: Holders;
  private readonly renewals = new Renewals();
  private count = 0;

  constructor(config: ScuttlebuttConfig) {
    const cap = Number.isFinite(config.maxEstimates) ? config.maxEstimates : config.maxStates;
    this.holders = new Holders(config.maxHolders ?? 4 * cap + 16, config.holderLeaseRounds ?? 4 * cap + 16);
  }

  /** Our rounds so far (a held owner's log says in which its newest state was applied). */
  get rounds(): number {
    return this.count;
  }

  /**
   * A round's pushes (holders.ts): our change to each member holding us, from its cursor; and a
   * one-entry digest to one owner we hold, which keeps us its holder (and corrects its cursor).
   */
  round(
    self: OwnState,
    logs: ReadonlyMap<NodeId, OwnerLog>,
    entryOf: (owner: NodeId, log: OwnerLog) => DigestEntry | undefined,
    deps: ScuttlebuttDeps,
    counters: ScuttlebuttCounters,
    out: { to: NodeId; msg: GossipMessage }[],
  ): void {
    const h = self.header();
    const member = (id: NodeId) => deps.member?.(id) ?? true;
    for (const { to, from } of this.holders.due(h, ++this.count, member)) {
      const s = ownState(from, self);
      if (s === undefined) continue;
      counters.statesSent[s.snapshot.kind === "full" ? "full" : "delta"]++;
      out.push({ to, msg: { type: "states", states: [s], wants: [] } });
    }
    for (const owner of this.renewals.next(logs, this.count, URGENT_RENEWALS)) {
      const entry = entryOf(owner, logs.get(owner) as OwnerLog);
      if (entry === undefined || !member(owner)) continue;
      counters.digestsSent++;
      out.push({ to: owner, msg: { type: "digest", entries: [entry], room: 0 } });
    }
  }

  /** `from` listed us (it holds us or asks for us) or is sent our state: it holds our version now. */
  note(
    selfId: NodeId,
    from: NodeId,
    theirs: Map<NodeId, DigestEntry | undefined>,
    states: OwnerState[],
    self: OwnState,
  ): void {
    if (!theirs.has(selfId) && states[0]?.snapshot.header.sender !== selfId) return;
    this.holders.note(from, self.header(), this.count);
  }

  /** Our estimate of `owner` is off its pushes (or we just took it): renew with it next round. */
  mismatch(owner: NodeId): void {
    this.renewals.mismatch(owner);
  }

  /** `owner` is gone: neither pushed to nor renewed with. */
  forget(owner: NodeId): void {
    this.holders.drop(owner);
    this.renewals.forget(owner);
  }
}
