/**
 * Scuttlebutt anti-entropy (van Renesse et al. 2008) for the peer estimates of §3.4: each round a node
 * sends a digest — (owner, epoch, version) of every owner it holds, itself included — to `fanout`
 * random members; the receiver answers with the states the initiator lacks and the owners it lacks
 * itself ("wants"), which the initiator then sends. Any node sends any owner's state (relay): safe
 * because each estimate has one writer and (epoch, version) only moves forward (Estimates), so a
 * relayed state older than what the receiver holds is ignored.
 *
 * A round's digests go to its partners one after another (`chain`): the second partner is sent a
 * digest that already holds what the first sent, so the same change is not pulled twice; an owner we
 * asked one peer for is not asked of another while the answer is on its way (`pendingMs`).
 *
 * How a relay carries another owner's change: it keeps the last `deltaLog` deltas it applied for that
 * owner, consecutive, and sends the chain from the receiver's version netted into one delta (a key
 * added then evicted costs nothing); a receiver further behind (or
 * of another epoch) gets the owner's whole key set — from our estimate, and only while that estimate
 * is exactly the owner's (no optimistic insert since: `clean`), else nothing (the owner or a cleaner
 * relay sends it). Cost: the log holds at most deltaLog × the keys of those deltas per owner; a chain
 * costs at most the sum of its deltas, a fallback 6 bytes per key of the owner's tree.
 *
 * `maxEstimates` bounds the owners held: a digest says how many new owners its sender would take, and
 * no more are sent to it or asked for, picked at random (so owners spread over holders, not the same
 * first few everywhere); when full, one owner we lack is asked for every `discoveryMs`, which replaces
 * the least useful held owner (the node scores usefulness: recent matches for its traffic), so new
 * specialists are still discovered without re-fetching whole key sets all the time.
 *
 * This class runs the rounds and messages; its roles: digests.ts builds digests, wants.ts decides what
 * to ask for (pending asks, room, discovery), relay.ts what a peer lacks, change-log.ts each owner's
 * log, holder-push.ts the push to holders (holders.ts).
 */
import { Estimates } from "../../estimates.js";
import { invariant } from "../../invariant.js";
import type { PeerIndex } from "../../peer-index.js";
import { isNewer, type Snapshot, type SnapshotHeader } from "../../snapshot.js";
import { ChangeLog } from "./change-log.js";
import {
  DEFAULT_SCUTTLEBUTT,
  type DigestEntry,
  type GossipMessage,
  type ScuttlebuttConfig,
  type ScuttlebuttCounters,
  type ScuttlebuttDeps,
} from "./config.js";
import { Digests } from "./digests.js";
import { HolderPush } from "./holder-push.js";
import { Relay } from "./relay.js";
import { netDeltas, type OwnerLog, type OwnerState, type OwnState, pickDistinct } from "./states.js";
import { Wants } from "./wants.js";

// Still importable from here (the selection itself is states.ts's, the vocabulary config.ts's).
export type {
  DigestEntry,
  GossipMessage,
  OwnerState,
  OwnState,
  ScuttlebuttConfig,
  ScuttlebuttCounters,
  ScuttlebuttDeps,
};
export { DEFAULT_SCUTTLEBUTT, netDeltas };

/** A member's id (node/types.ts's NodeId). */
type NodeId = string;

export class Scuttlebutt {
  readonly estimates: Estimates;
  private readonly logs = new Map<NodeId, OwnerLog>();
  /** This round's partners still to get our digest, and the one whose answer we wait for. */
  private chain: { awaiting: NodeId; rest: NodeId[] } | undefined;
  /** With `pushToHolders`: the members holding us (pushed our change each round), and our renewals. */
  private push: HolderPush | undefined;
  private readonly digests: Digests;
  private readonly wants: Wants;
  private readonly relay: Relay;
  private readonly changes: ChangeLog;
  readonly counters: ScuttlebuttCounters = {
    digestsSent: 0,
    statesSent: { full: 0, delta: 0 },
    statesReceived: { applied: 0, stale: 0, duplicate: 0, needFull: 0, dropped: 0, deferred: 0 },
    invalid: 0,
  };

  constructor(
    private readonly selfId: NodeId,
    readonly index: PeerIndex,
    private readonly deps: ScuttlebuttDeps,
    private readonly config: ScuttlebuttConfig = DEFAULT_SCUTTLEBUTT,
  ) {
    this.estimates = new Estimates(index, config.stepKeys ?? 0);
    const { logs, estimates, counters } = this;
    this.digests = new Digests(selfId, logs, estimates, deps, config);
    this.wants = new Wants(selfId, logs, estimates, deps, config);
    this.relay = new Relay(selfId, index, estimates, logs, deps, config, counters);
    this.changes = new ChangeLog(estimates, index, deps, config, counters);
    if (config.pushToHolders) this.pushToHolders();
  }

  /** From now on, push our changes to the members holding us (config `pushToHolders`). */
  pushToHolders(): void {
    if (this.push !== undefined) return;
    this.push = new HolderPush(this.config);
  }

  /** Our rounds so far: counted with push to holders only. */
  private get rounds(): number {
    return this.push?.rounds ?? 0;
  }

  /** Owners we hold an estimate of (not ourselves). */
  owners(): IterableIterator<NodeId> {
    return this.logs.keys();
  }
  /** How many owners we hold. */
  get held(): number {
    return this.logs.size;
  }
  holds(owner: NodeId): boolean {
    return this.logs.has(owner);
  }
  /** The header of the newest state of `owner` we applied (its advertised load, as relayed). */
  header(owner: NodeId): SnapshotHeader | undefined {
    return this.logs.get(owner)?.header;
  }

  /** Our digest: ourselves first, then every owner held (at the version a staged apply will hold). */
  digest(self: OwnState): DigestEntry[] {
    return this.digests.whole(self);
  }

  /**
   * A round's digest message. A sampled digest (fewer entries than owners held) says room 0: its
   * receiver reads an owner missing from a digest as one its sender lacks and sends it whole (itself
   * too) to a sender with room, so with a sample it sent whole key sets to members that held them.
   * The sender still takes new owners: those listed in the digests it receives (wants, up to its room).
   */
  private roundMessage(self: OwnState): GossipMessage {
    const entries = this.digests.round(self, this.push !== undefined);
    return { type: "digest", entries, room: this.digests.sampled ? 0 : this.wants.room() };
  }

  /** True while a staged apply needs `step` calls (the node arms a timer). */
  get busy(): boolean {
    return this.estimates.busy;
  }

  /** One step of staged apply; states whose apply completed are logged (relayed from then on). */
  step(): void {
    this.estimates.step();
    const busy = this.estimates.busy;
    for (const [owner, log] of this.logs) {
      const d = log.deferred;
      if (d === undefined) continue;
      const held = this.estimates.held(owner);
      const h = d.snapshot.header;
      if (held !== undefined && held.epoch === h.epoch && held.version === h.version) {
        log.deferred = undefined;
        this.changes.settle(owner, log, d.snapshot, d.blocks, "applied", this.rounds, this.push);
      } else if (!busy || (held !== undefined && isNewer(held, h))) log.deferred = undefined;
    }
  }

  /**
   * A round: our digest to `fanout` members picked at random from `members` — with `chain`, to the
   * first now and to each next one when the previous answered (`continueRound`); a lost answer ends
   * the round early (the next round starts afresh).
   */
  round(members: readonly NodeId[], self: OwnState): { to: NodeId; msg: GossipMessage }[] {
    const to = pickDistinct(members, this.config.fanout, this.deps.random);
    this.chain = undefined;
    if (this.config.chain && to.length > 1) {
      const [first, ...rest] = to as [NodeId, ...NodeId[]];
      this.chain = { awaiting: first, rest };
      to.length = 1;
    }
    const msg = this.roundMessage(self);
    this.counters.digestsSent += to.length;
    const out = to.map((t) => ({ to: t, msg }));
    if (this.push !== undefined) {
      const entryOf = (owner: NodeId, log: OwnerLog) => this.digests.entryOf(owner, log);
      this.push.round(self, this.logs, entryOf, this.deps, this.counters, out);
    }
    return out;
  }

  /**
   * A member just admitted that we hold no estimate of (`unheld`: how many live members we lack): a
   * digest of ourselves alone, with room for one owner, so it answers with its own state and asks for
   * ours — the pair hold each other within a round trip instead of after the rounds relays take to
   * reach everyone (a cluster forming, a node joining). Bounded by what we would take: below
   * `maxEstimates`, a random share (room / unheld) of the members admitted is greeted.
   */
  greet(to: NodeId, self: OwnState, unheld: number): GossipMessage | undefined {
    if (to === this.selfId || this.logs.has(to)) return undefined;
    const room = this.config.maxEstimates - this.logs.size;
    if (room <= 0 || (room < unheld && this.deps.random() * unheld >= room)) return undefined;
    this.counters.digestsSent++;
    return { type: "digest", entries: [this.digests.selfEntry(self)], room: 1 };
  }

  /**
   * Content discovery (summary.ts): `owner`'s cache summary lists a prefix our traffic asks for and
   * no owner held has. It is admitted now (in place of the least useful owner when full), holding
   * nothing until its state comes, and asked for that state. undefined: held already, or not a member.
   */
  seek(owner: NodeId): GossipMessage | undefined {
    if (owner === this.selfId || this.logs.has(owner) || !(this.deps.member?.(owner) ?? true))
      return undefined;
    this.wants.seeking(owner);
    if (!this.admit(owner)) return undefined;
    this.wants.askedAt(owner, this.deps.now?.());
    return { type: "states", states: [], wants: [{ owner, epoch: 0, version: 0 }] };
  }

  /**
   * After a message from `from`: if it answered our round's digest, that digest (now up to date with
   * what `from` sent) to the round's next partner.
   */
  continueRound(from: NodeId, self: OwnState): { to: NodeId; msg: GossipMessage } | undefined {
    const c = this.chain;
    if (c === undefined || c.awaiting !== from) return undefined;
    const to = c.rest.shift();
    if (to === undefined) {
      this.chain = undefined;
      return undefined;
    }
    c.awaiting = to;
    this.counters.digestsSent++;
    return { to, msg: this.roundMessage(self) };
  }

  /**
   * A message from `from`; returns the answer to send back, if any (states for a digest; the wanted
   * states for a states message that carries wants).
   */
  onMessage(from: NodeId, msg: GossipMessage, self: OwnState): GossipMessage | undefined {
    if (msg.type === "digest") {
      if (msg.entries.length > this.config.maxDigest) {
        this.counters.invalid++;
        return undefined;
      }
      const theirs = new Map<NodeId, DigestEntry>();
      for (const e of msg.entries) theirs.set(e.owner, e);
      const states = this.statesFor(theirs, Math.max(0, Math.floor(msg.room)), self);
      this.push?.note(this.selfId, from, theirs, states, self);
      const wants = this.wants.of(msg.entries);
      // An owner we do not hold is wanted from version 0 of epoch 0: anything of it is newer.
      return { type: "states", states, wants: wants.slice(0, this.config.maxDigest) };
    }
    if (msg.states.length > this.config.maxStates || msg.wants.length > this.config.maxDigest) {
      this.counters.invalid++;
      return undefined;
    }
    for (const s of msg.states) {
      const verdict = this.apply(s.snapshot, s.blocks);
      // The owner's own push did not fit our estimate: our cursor at it is off; renew with it now.
      if (this.push !== undefined && verdict === "need-full" && s.snapshot.header.sender === from)
        this.push.mismatch(from);
    }
    if (msg.wants.length === 0) return undefined;
    const theirs = new Map<NodeId, DigestEntry | undefined>();
    // A want at version 0 is of an owner the peer does not hold (or whose whole set it needs): sent
    // whole even when that owner is itself still at version 0 (an empty cache, a cluster forming).
    for (const w of msg.wants) theirs.set(w.owner, w.version === 0 ? undefined : w);
    const states = this.statesFor(theirs, 0, self, true);
    this.push?.note(this.selfId, from, theirs, states, self);
    return { type: "states", states, wants: [] };
  }

  /** What a peer holding `theirs` lacks (relay.ts), at our round with push to holders. */
  private statesFor(
    theirs: Map<NodeId, DigestEntry | undefined>,
    room: number,
    self: OwnState,
    onlyListed = false,
  ): OwnerState[] {
    const round = this.push === undefined ? undefined : this.rounds;
    return this.relay.statesFor(theirs, room, self, round, onlyListed);
  }

  /** Our estimate of `owner` now includes a guess (an optimistic insert): never relay it whole. */
  polluted(owner: NodeId): void {
    const log = this.logs.get(owner);
    if (log) log.clean = false;
  }

  remove(owner: NodeId): void {
    this.push?.forget(owner);
    this.logs.delete(owner);
    this.wants.forget(owner);
    this.estimates.remove(owner);
  }

  /** A state of some owner (relayed or its own): applied by the one-writer rule, logged for relaying. */
  apply(s: Snapshot, blocks: number): string {
    const rx = this.counters.statesReceived;
    const owner = s.header.sender;
    if (owner === this.selfId || !(this.deps.member?.(owner) ?? true)) {
      rx.dropped++;
      return "dropped";
    }
    if (!this.logs.has(owner) && !this.admit(owner)) {
      rx.dropped++;
      return "dropped";
    }
    const verdict = this.estimates.apply(s);
    const log = this.logs.get(owner) as OwnerLog;
    this.wants.forget(owner);
    if (verdict === "deferred") {
      rx.deferred++;
      log.deferred = { snapshot: s, blocks };
      return verdict;
    }
    this.changes.settle(owner, log, s, blocks, verdict, this.rounds, this.push);
    return verdict;
  }

  /** Takes a new owner: while there is room, else (discovery) in place of the least useful. */
  private admit(owner: NodeId): boolean {
    if (!this.wants.hasRoom()) {
      if (!this.wants.replaces(owner)) return false;
      let worst: NodeId | undefined;
      let worstScore = Number.POSITIVE_INFINITY;
      for (const o of this.logs.keys()) {
        const sc = this.deps.score?.(o) ?? 0;
        if (sc < worstScore) {
          worst = o;
          worstScore = sc;
        }
      }
      if (worst === undefined) return false;
      this.remove(worst);
    }
    const header: SnapshotHeader = {
      sender: owner,
      epoch: -1,
      version: 0,
      tokenCount: 0,
      capacity: 0,
      queueDepth: 0,
      pushBackMs: 0,
    };
    this.logs.set(owner, { header, blocks: 0, deltas: [], clean: false, wantFull: false });
    // Tell the owner we hold it (a renewal digest), so it pushes its changes to us.
    this.push?.mismatch(owner);
    invariant(this.logs.size <= this.config.maxEstimates, "scuttlebutt holds more owners than maxEstimates");
    return true;
  }
}
